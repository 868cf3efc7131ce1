// Defects a hostile client found (issue 14), each against a real server on loopback:
// foreign pages streaming from a local server, unauthenticated uploads read into memory,
// malformed requests answered with resets, stalled uploads, and the rest.
#include <gtest/gtest.h>

#include <stdexcept>

#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

// A WebSocket upgrade by hand, to read the HTTP status of a refused one.
HttpResult upgrade(uint16_t port, const std::string& target, const std::string& origin) {
  std::vector<std::pair<std::string, std::string>> headers = {{"Connection", "Upgrade"},
                                                              {"Upgrade", "websocket"},
                                                              {"Sec-WebSocket-Version", "13"},
                                                              {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
  if (!origin.empty()) headers.emplace_back("Origin", origin);
  return http_request(port, "GET", target, "", headers);
}

class OriginCheck : public ServerFixture {
 protected:
  void start_with(std::vector<std::string> origins) {
    server::ServerConfig config;
    config.pcm_input = true;
    config.cors_origins = std::move(origins);
    start(config);
  }
  std::string self() const { return "http://127.0.0.1:" + std::to_string(port_); }
};

TEST_F(OriginCheck, ForeignPageIsRefusedOnBothStreamRoutes) {
  start_with({});
  for (const char* route : {"/asr", "/v1/listen?encoding=linear16&sample_rate=16000"}) {
    HttpResult r = upgrade(port_, route, "https://evil.example");
    EXPECT_EQ(r.status, 403) << route << ": " << r.body;
    EXPECT_NE(r.body.find("--cors-origins"), std::string::npos) << r.body;
    EXPECT_THROW(WsClient(port_, route, {{"Origin", "https://evil.example"}}), std::runtime_error) << route;
  }
  // A page on another port of the same host is another origin.
  EXPECT_EQ(upgrade(port_, "/asr", "http://127.0.0.1:1").status, 403);
  EXPECT_EQ(server_->active_sessions(), 0u);
}

TEST_F(OriginCheck, OwnPageAndClientsWithoutOriginAreAllowed) {
  start_with({});
  for (const std::string& origin : {self(), "https://127.0.0.1:" + std::to_string(port_), std::string()}) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!origin.empty()) headers.emplace_back("Origin", origin);
    WsClient client(port_, "/asr", headers);
    EXPECT_EQ(client.read().value()["type"], "config") << origin;
    client.close();
  }
  EXPECT_TRUE(wait_idle());
}

TEST_F(OriginCheck, ListedOriginsAreAllowedAndStarAllowsAny) {
  start_with({"https://app.example"});
  WsClient listed(port_, "/asr", {{"Origin", "https://app.example"}});
  EXPECT_EQ(listed.read().value()["type"], "config");
  listed.close();
  EXPECT_EQ(upgrade(port_, "/asr", "https://other.example").status, 403);
  TearDown();
  start_with({"*"});
  WsClient any(port_, "/asr", {{"Origin", "https://other.example"}});
  EXPECT_EQ(any.read().value()["type"], "config");
  any.close();
  EXPECT_TRUE(wait_idle());
}

}  // namespace
}  // namespace earshot::testing

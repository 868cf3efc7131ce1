// Deepgram Flux's /v2/listen on the loopback server with the deterministic doubles
// and a real turn stage: Connected, a StartOfTurn and an EndOfTurn per phrase with
// the phrase's words, thresholds from the query, ForceEndTurn, Configure, and the
// refusals (bad options by name, a server without turn detection, draining).
#include <gtest/gtest.h>

#include "stages/turns/turn_stage.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::vector<json> read_all(WsClient& client) {
  std::vector<json> out;
  while (auto m = client.read()) out.push_back(*m);
  return out;
}

std::vector<json> turn_events(const std::vector<json>& messages, const std::string& event) {
  std::vector<json> out;
  for (const json& m : messages)
    if (m.value("type", "") == "TurnInfo" && m["event"] == event) out.push_back(m);
  return out;
}

server::ServerHooks with_turns() {
  server::ServerHooks hooks = fake_hooks();
  hooks.make_stages = [](const stages::StreamRequest& request) {
    std::vector<std::unique_ptr<stages::Stage>> chain;
    if (std::optional<stages::turns::TurnSettings> s = stages::turns::settings_for(request.params, {}))
      chain.push_back(std::make_unique<stages::turns::TurnStage>(*s));
    return chain;
  };
  return hooks;
}

class Flux : public ServerFixture {
 protected:
  void SetUp() override {
    server::ServerConfig config;
    config.api_token = "tok";
    config.stages = {"turns"};
    start(config, with_turns());
  }
  std::vector<std::pair<std::string, std::string>> auth() { return {{"Authorization", "Token tok"}}; }
  // 0.1 s pieces, `gap_ms` apart: 5 ms is 20x real time (the server's backpressure then
  // hands the audio to the session in whatever pieces it reads), 100 ms real time (as a
  // voice agent streams: the turn stage sees the silence grow piece by piece).
  void send_paced(WsClient& client, const std::vector<float>& audio, int gap_ms = 5) {
    const std::vector<int16_t> pcm = to_s16(audio);
    for (size_t i = 0; i < pcm.size(); i += 1600) {
      client.send_pcm(std::vector<int16_t>(pcm.begin() + i, pcm.begin() + std::min(pcm.size(), i + 1600)), 3200);
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
  }
};

TEST_F(Flux, ATurnPerPhraseWithItsWords) {
  WsClient client(port_, "/v2/listen?model=flux-general-en&encoding=linear16&sample_rate=16000", auth());
  send_paced(client, concat({tone(1.0, 0.1f), silence(1.5), tone(1.0, 0.3f), silence(1.0)}));
  client.send_text(R"({"type":"KeepAlive"})");
  client.send_text(R"({"type":"CloseStream"})");
  const std::vector<json> messages = read_all(client);
  EXPECT_EQ(client.close_code(), 1000);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0]["type"], "Connected");
  for (size_t i = 0; i < messages.size(); ++i) EXPECT_EQ(messages[i]["sequence_id"], i);
  const std::vector<json> starts = turn_events(messages, "StartOfTurn"), ends = turn_events(messages, "EndOfTurn");
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0]["turn_index"], 0);
  EXPECT_EQ(ends[1]["turn_index"], 1);
  EXPECT_EQ(ends[0]["transcript"], "w100 w100");
  EXPECT_EQ(ends[1]["transcript"], "w298 w300");
  EXPECT_GE(ends[0]["end_of_turn_confidence"].get<double>(), 0.7);
  EXPECT_TRUE(turn_events(messages, "EagerEndOfTurn").empty()) << "no eager_eot_threshold, no eager ends";
  // Each turn's end precedes the next turn's start.
  const auto pos = [&](const json& m) { return m["sequence_id"].get<int>(); };
  EXPECT_LT(pos(ends[0]), pos(starts[1]));
}

TEST_F(Flux, EagerEndsWhenAsked) {
  WsClient client(port_,
                  "/v2/listen?encoding=linear16&sample_rate=16000&eager_eot_threshold=0.3&eot_threshold=0.99&"
                  "eot_timeout_ms=500",
                  auth());
  // In real time: an eager end needs the turn's words committed while the silence is
  // between the eager and the final threshold, which audio read in one burst can skip.
  send_paced(client, concat({tone(1.0, 0.1f), silence(1.2)}), 100);
  client.send_text(R"({"type":"Configure","thresholds":{"eot_threshold":0.8}})");
  client.send_text(R"({"type":"CloseStream"})");
  const std::vector<json> messages = read_all(client);
  const std::vector<json> eager = turn_events(messages, "EagerEndOfTurn"), ends = turn_events(messages, "EndOfTurn");
  std::string seen;
  for (const json& m : messages) seen += m.dump() + "\n";
  ASSERT_EQ(eager.size(), 1u) << seen;
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(eager[0]["transcript"], ends[0]["transcript"]);
  EXPECT_LT(eager[0]["sequence_id"].get<int>(), ends[0]["sequence_id"].get<int>());
  const json* configured = nullptr;
  for (const json& m : messages)
    if (m["type"] == "ConfigureSuccess") configured = &m;
  ASSERT_NE(configured, nullptr) << seen;
  EXPECT_DOUBLE_EQ((*configured)["thresholds"]["eot_threshold"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ((*configured)["thresholds"]["eager_eot_threshold"].get<double>(), 0.3) << "the stream's own";
  EXPECT_EQ((*configured)["thresholds"]["eot_timeout_ms"], 500);
}

TEST_F(Flux, ConfigureChangesTheThresholdsFromItsPlaceInTheAudio) {
  // Only the end of the stream ends a turn at first: the first pause does not.
  WsClient client(port_, "/v2/listen?encoding=linear16&sample_rate=16000&eot_threshold=1.0&eot_timeout_ms=60000",
                  auth());
  send_paced(client, concat({tone(1.0, 0.1f), silence(1.2)}), 100);
  client.send_text(R"({"type":"Configure","thresholds":{"eot_threshold":0.7,"eot_timeout_ms":2000},"keyterms":[]})");
  client.send_text(R"({"type":"Configure","keyterms":["earshot"]})");              // keyterms are fixed per stream
  client.send_text(R"({"type":"Configure","thresholds":{"eot_threshold":0.2}})");  // out of range
  send_paced(client, concat({tone(1.0, 0.1f), silence(1.2)}), 100);
  client.send_text(R"({"type":"CloseStream"})");
  const std::vector<json> messages = read_all(client);
  std::string seen;
  std::vector<json> successes, failures;
  for (const json& m : messages) {
    seen += m.dump() + "\n";
    if (m["type"] == "ConfigureSuccess") successes.push_back(m);
    if (m["type"] == "ConfigureFailure") failures.push_back(m);
  }
  ASSERT_EQ(successes.size(), 1u) << seen;
  EXPECT_DOUBLE_EQ(successes[0]["thresholds"]["eot_threshold"].get<double>(), 0.7);
  EXPECT_EQ(successes[0]["thresholds"]["eot_timeout_ms"], 2000);
  EXPECT_FALSE(successes[0]["thresholds"].contains("eager_eot_threshold"));
  EXPECT_EQ(successes[0]["keyterms"], json::array());
  ASSERT_EQ(failures.size(), 2u) << seen;
  EXPECT_NE(failures[0]["description"].get<std::string>().find("keyterms"), std::string::npos);
  EXPECT_NE(failures[1]["description"].get<std::string>().find("'eot_threshold'"), std::string::npos);
  // The new threshold ends the first turn once the stream reaches the Configure (its
  // pause long over), before the second phrase opens the next; without it the two
  // phrases would be one turn.
  const std::vector<json> starts = turn_events(messages, "StartOfTurn"), ends = turn_events(messages, "EndOfTurn");
  ASSERT_EQ(ends.size(), 2u) << seen;
  ASSERT_EQ(starts.size(), 2u) << seen;
  EXPECT_GT(ends[0]["sequence_id"].get<int>(), successes[0]["sequence_id"].get<int>());
  EXPECT_LT(ends[0]["sequence_id"].get<int>(), starts[1]["sequence_id"].get<int>());
  EXPECT_EQ(ends[0]["trigger"], "model");
}

TEST_F(Flux, ForceEndTurnEndsTheTurnAtOnce) {
  WsClient client(port_, "/v2/listen?encoding=linear16&sample_rate=16000&eot_threshold=1.0", auth());
  send_paced(client, tone(1.2, 0.1f));
  client.send_text(R"({"type":"ForceEndTurn"})");
  // The turn ends without silence (threshold 1.0: only forced ends).
  std::vector<json> messages;
  while (turn_events(messages, "EndOfTurn").empty()) {
    std::optional<json> m = client.read();
    ASSERT_TRUE(m);
    messages.push_back(*m);
  }
  EXPECT_EQ(turn_events(messages, "EndOfTurn")[0]["transcript"], "w100 w100 p100");
  client.send_text(R"({"type":"CloseStream"})");
  read_all(client);
  EXPECT_EQ(client.close_code(), 1000);
}

TEST_F(Flux, BadOptionsAndMessages) {
  WsClient bad(port_, "/v2/listen?encoding=linear16&sample_rate=16000&eot_threshold=2", auth());
  std::optional<json> m = bad.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "Error");
  EXPECT_NE((*m)["description"].get<std::string>().find("'eot_threshold'"), std::string::npos);
  EXPECT_FALSE(bad.read());
  EXPECT_EQ(bad.close_code(), 1008);

  // An eager threshold above the server's eot_threshold (0.7 here), the stream giving none.
  WsClient eager(port_, "/v2/listen?encoding=linear16&sample_rate=16000&eager_eot_threshold=0.8", auth());
  m = eager.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "Error");
  EXPECT_NE((*m)["description"].get<std::string>().find("above eot_threshold"), std::string::npos) << m->dump();
  EXPECT_FALSE(eager.read());
  EXPECT_EQ(eager.close_code(), 1008);

  WsClient client(port_, "/v2/listen?encoding=linear16&sample_rate=16000", auth());
  ASSERT_EQ(client.read().value()["type"], "Connected");
  client.send_text(R"({"type":"Finalize"})");
  m = client.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "Error");
  EXPECT_NE((*m)["description"].get<std::string>().find("ForceEndTurn"), std::string::npos);
  client.send_text(R"({"type":"Configure","thresholds":{"eager_eot_threshold":0.8}})");
  m = client.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "ConfigureFailure");
  EXPECT_NE((*m)["description"].get<std::string>().find("above eot_threshold"), std::string::npos) << m->dump();
  client.send_text(R"({"type":"CloseStream"})");
  read_all(client);
  EXPECT_EQ(client.close_code(), 1000);

  WsClient wrong(port_, "/v2/listen?encoding=linear16&sample_rate=16000", {{"Authorization", "Token no"}});
  m = wrong.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "Error");
  EXPECT_NE((*m)["description"].get<std::string>().find("token"), std::string::npos);
  EXPECT_FALSE(wrong.read());
  EXPECT_EQ(wrong.close_code(), 1008);
}

class FluxWithoutTurns : public ServerFixture {
 protected:
  void SetUp() override { start({}, fake_hooks()); }
};

TEST_F(FluxWithoutTurns, IsRefusedWithTheReason) {
  WsClient client(port_, "/v2/listen?encoding=linear16&sample_rate=16000");
  std::optional<json> m = client.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "Error");
  EXPECT_NE((*m)["description"].get<std::string>().find("--turn-detection"), std::string::npos);
  EXPECT_FALSE(client.read());
  EXPECT_EQ(client.close_code(), 1008);
}

}  // namespace
}  // namespace earshot::testing

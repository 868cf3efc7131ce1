// Defects a hostile client found (issue 14), each against a real server on loopback:
// foreign pages streaming from a local server, unauthenticated uploads read into memory,
// malformed requests answered with resets, stalled uploads, and the rest.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <thread>

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

// A TCP connection by hand: exactly the bytes a test chooses, and reads with a deadline.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect failed");
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void send(const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed: the test reads why
      at += static_cast<size_t>(n);
    }
  }
  // One response (status line, headers, a Content-Length body), "" when none came in `seconds`
  // or the connection ended first.
  std::string read_response(double seconds = 5) {
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    for (;;) {
      size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        const std::string head = pending_.substr(0, end);
        std::string lower = head;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (size_t at = lower.find("content-length:"); at != std::string::npos)
          length = std::stoul(head.substr(at + 15));
        if (pending_.size() >= end + 4 + length) {
          std::string out = pending_.substr(0, end + 4 + length);
          pending_.erase(0, out.size());
          return out;
        }
      }
      if (!receive(deadline)) return "";
    }
  }
  // Whether the server closed the connection (EOF or reset) within `seconds`.
  bool closed_within(double seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    while (receive(deadline)) {
    }
    return eof_;
  }

 private:
  bool receive(std::chrono::steady_clock::time_point deadline) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0 || eof_) return false;
    timeval tv{static_cast<time_t>(left), static_cast<suseconds_t>((left - std::floor(left)) * 1e6)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buffer[4096];
    ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      pending_.append(buffer, static_cast<size_t>(n));
      return true;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) eof_ = true;
    return n < 0 && errno == EINTR;
  }

  int fd_;
  std::string pending_;
  bool eof_ = false;
};

int upload_status(uint16_t port);

int status_of(const std::string& response) {
  return response.size() > 12 && response.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(response.substr(9, 3)) : 0;
}
bool has_header(const std::string& response, const std::string& line) {
  return response.find("\r\n" + line + "\r\n") != std::string::npos;
}

const std::string kUploadHead =
    "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    "Content-Type: multipart/form-data; boundary=B\r\n";

class Hostile : public ServerFixture {
 protected:
  void start_with(server::ServerConfig config = {}) {
    config.pcm_input = true;
    server::ServerHooks hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start(config, hooks);
  }
};

// --- 1: nothing of an upload is read before its headers are admitted.

TEST_F(Hostile, UnauthenticatedUploadIsRefusedOnItsHeaders) {
  server::ServerConfig config;
  config.api_token = "secret";
  start_with(config);
  RawConnection c(port_);
  // 20 MB declared, none sent: an answer now proves the body was never waited for.
  c.send(kUploadHead + "Content-Length: 20000000\r\n\r\n");
  const std::string response = c.read_response(5);
  EXPECT_EQ(status_of(response), 401) << response;
  EXPECT_TRUE(has_header(response, "Connection: close")) << response;
  EXPECT_TRUE(c.closed_within(5));
}

TEST_F(Hostile, ConcurrentUploadsAreBounded) {
  server::ServerConfig config;
  config.max_uploads = 1;
  start_with(config);
  RawConnection first(port_);
  first.send(kUploadHead + "Content-Length: 100000\r\n\r\n--B\r\n");  // and then nothing for now
  ASSERT_TRUE(eventually([&] { return server_->open_uploads() == 1; })) << "the first upload was not admitted";
  RawConnection second(port_);
  second.send(kUploadHead + "Content-Length: 100000\r\n\r\n");
  const std::string busy = second.read_response(5);
  EXPECT_EQ(status_of(busy), 503) << busy;
  EXPECT_TRUE(has_header(busy, "Retry-After: 1")) << busy;
  EXPECT_NE(busy.find("--max-uploads"), std::string::npos) << busy;
}

TEST_F(Hostile, ExpectContinueIsAnsweredAfterAdmission) {
  start_with();
  RawConnection c(port_);
  c.send(kUploadHead + "Content-Length: 10\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response(5)), 100);
}

// --- 7: malformed or stalled requests get an answer, not a reset.

TEST_F(Hostile, OversizedHeadersGet431) {
  start_with();
  RawConnection c(port_);
  c.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(32 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response(5)), 431);
}

TEST_F(Hostile, GarbageRequestLineGets400) {
  start_with();
  RawConnection c(port_);
  c.send("\x01\x02 garbage \x7f\r\n\r\n");
  const std::string response = c.read_response(5);
  EXPECT_EQ(status_of(response), 400) << response;
  EXPECT_NE(response.find("malformed HTTP request"), std::string::npos) << response;
}

TEST_F(Hostile, NegativeOrNonNumericContentLengthGets400) {
  start_with();
  for (const char* length : {"-5", "abc"}) {
    RawConnection c(port_);
    c.send(kUploadHead + "Content-Length: " + length + "\r\n\r\n");
    EXPECT_EQ(status_of(c.read_response(5)), 400) << length;
  }
}

TEST_F(Hostile, StalledUploadGets408AfterTheIdleTimeout) {
  server::ServerConfig config;
  config.idle_timeout_seconds = 0.3;
  start_with(config);
  RawConnection c(port_);
  c.send(kUploadHead + "Content-Length: 1000\r\n\r\n--B\r\n");
  const std::string response = c.read_response(5);
  EXPECT_EQ(status_of(response), 408) << response;
  EXPECT_NE(response.find("--idle-timeout"), std::string::npos) << response;
  // The permit is back: another upload is admitted.
  EXPECT_EQ(upload_status(port_), 400);
}

// A client sending a byte now and then never stalls (each byte resets --idle-timeout),
// yet holds an upload permit: below --body-min-rate-kb after the grace it gets 408, and
// the permit goes to the next upload.
TEST_F(Hostile, TricklingUploadGets408ForItsRateAndFreesThePermit) {
  server::ServerConfig config;
  config.max_uploads = 1;
  config.body_rate_grace_seconds = 0.2;
  config.body_min_bytes_per_second = 1000;
  start_with(config);
  RawConnection c(port_);
  c.send(kUploadHead + "Content-Length: 100000\r\n\r\n--B\r\n");
  std::atomic<bool> answered{false};
  std::thread trickle([&] {
    while (!answered) {
      c.send("x");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const std::string response = c.read_response(10);
  answered = true;
  trickle.join();
  EXPECT_EQ(status_of(response), 408) << response;
  EXPECT_NE(response.find("too slow"), std::string::npos) << response;
  EXPECT_NE(response.find("--body-min-rate-kb"), std::string::npos) << response;
  EXPECT_EQ(upload_status(port_), 400) << "the permit is back";
}

// A body arriving steadily but never ending within --body-timeout-s gets 408 too.
TEST_F(Hostile, EndlessUploadGets408AtTheBodyDeadline) {
  server::ServerConfig config;
  config.body_timeout_seconds = 0.3;
  config.body_min_bytes_per_second = 0;
  start_with(config);
  RawConnection c(port_);
  c.send(kUploadHead + "Content-Length: 10000000\r\n\r\n--B\r\n");
  std::atomic<bool> answered{false};
  std::thread sender([&] {
    while (!answered) {
      c.send(std::string(100, 'x'));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const std::string response = c.read_response(10);
  answered = true;
  sender.join();
  EXPECT_EQ(status_of(response), 408) << response;
  EXPECT_NE(response.find("--body-timeout-s"), std::string::npos) << response;
}

TEST_F(Hostile, IdleHttpConnectionsUseTheIdleTimeout) {
  server::ServerConfig config;
  config.idle_timeout_seconds = 0.3;
  start_with(config);
  RawConnection c(port_);
  c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response(5)), 200);
  EXPECT_TRUE(c.closed_within(5));  // kept open for 60 s before
}

TEST_F(Hostile, BearerSchemeIsCaseInsensitive) {
  server::ServerConfig config;
  config.api_token = "secret";
  start_with(config);
  for (const char* scheme : {"Bearer", "bearer", "BEARER", "bEaReR"})
    EXPECT_EQ(http_request(port_, "GET", "/v1/models", "", {{"Authorization", std::string(scheme) + " secret"}}).status,
              200)
        << scheme;
  EXPECT_EQ(http_request(port_, "GET", "/v1/models", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http_request(port_, "GET", "/v1/models", "", {{"Authorization", "Bearersecret"}}).status, 401);
}

TEST_F(Hostile, PostHealthGets405WithAllow) {
  start_with();
  HttpResult r = http_request(port_, "POST", "/health", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD");
  EXPECT_EQ(http_request(port_, "HEAD", "/health").status, 200);
}

TEST_F(Hostile, OversizedMessageLogNamesTheRealOption) {
  server::ServerConfig config;
  config.max_message_bytes = 1000;
  start_with(config);
  ::testing::internal::CaptureStderr();
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  client.send_binary(std::vector<uint8_t>(5000, 1));
  while (client.read()) {
  }
  EXPECT_EQ(client.close_code(), 1009);
  ASSERT_TRUE(wait_idle());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("over --max-message-kb"), std::string::npos) << log;
  EXPECT_EQ(log.find("--max-message-bytes"), std::string::npos) << log;
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

// An upload of bytes no decoder reads: 400 once admitted and read.
int upload_status(uint16_t port) {
  const std::string body = "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
                           std::string(3000, 'z') + "\r\n--B--\r\n";
  return http_request(port, "POST", "/v1/audio/transcriptions", body,
                      {{"Content-Type", "multipart/form-data; boundary=B"}})
      .status;
}

}  // namespace
}  // namespace earshot::testing

// Faults a hostile or broken client causes, each with its asserted outcome: gone in
// the middle of a message, half-closed or silent connections, malformed and huge
// frames, more sessions than --max-sessions. Raw sockets, so the bytes are exactly
// what a broken peer sends. A peer that keeps its socket open after the server's close
// frame holds its slot until Beast's close-handshake timeout (30 s). (Also covering faults elsewhere:
// AbruptDisconnectFrees- TheSession and OversizedFrameClosesThatStreamOnly in ws_protocol_test.cpp, SIGTERM with live
// sessions in drain_test.cpp and GracefulShutdown..., garbage audio in encoded_input_test.cpp.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <future>

#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

// A WebSocket client on a bare socket: the upgrade, then hand-made frames.
class RawWs {
 public:
  explicit RawWs(uint16_t port, const std::string& target = "/asr") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect");
    send_raw("GET " + target +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) head += static_cast<char>(read_byte());
    if (head.find(" 101 ") == std::string::npos) throw std::runtime_error("no upgrade: " + head);
  }
  ~RawWs() {
    if (fd_ >= 0) ::close(fd_);
  }

  void send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may have closed already; the test reads why
      sent += static_cast<size_t>(n);
    }
  }
  // A frame header (FIN + opcode, the payload length as announced) and `payload`,
  // masked unless `masked` is false; `announced` may exceed what is sent.
  void send_frame(uint8_t first, const std::string& payload, uint64_t announced, bool masked = true) {
    std::string f(1, static_cast<char>(first));
    const char mask_bit = masked ? static_cast<char>(0x80) : 0;
    if (announced < 126) {
      f += static_cast<char>(mask_bit | static_cast<char>(announced));
    } else if (announced < 65536) {
      f += static_cast<char>(mask_bit | 126);
      f += static_cast<char>(announced >> 8);
      f += static_cast<char>(announced & 0xff);
    } else {
      f += static_cast<char>(mask_bit | 127);
      for (int i = 7; i >= 0; --i) f += static_cast<char>((announced >> (8 * i)) & 0xff);
    }
    const char key[4] = {0x11, 0x22, 0x33, 0x44};
    if (masked) f.append(key, 4);
    for (size_t i = 0; i < payload.size(); ++i) f += masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
    send_raw(f);
  }
  void send_binary(const std::string& payload) { send_frame(0x82, payload, payload.size()); }

  // Reads frames until the server's close frame (its code) or EOF (-1); skips data
  // frames. Bounded by `seconds`; -2 on timeout.
  int read_close(double seconds = 10) {
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
    while (true) {
      const int b0 = read_byte(deadline), b1 = b0 < 0 ? b0 : read_byte(deadline);
      if (b0 < 0 || b1 < 0) return b0 < 0 ? b0 : b1;
      uint64_t n = static_cast<uint64_t>(b1 & 0x7f);
      if (n >= 126) {
        const int bytes = n == 126 ? 2 : 8;
        n = 0;
        for (int i = 0; i < bytes; ++i) n = (n << 8) | static_cast<uint64_t>(read_byte(deadline));
      }
      std::string payload;
      for (uint64_t i = 0; i < n; ++i) payload += static_cast<char>(read_byte(deadline));
      if ((b0 & 0x0f) == 0x8) {
        if (payload.size() < 2) return 1005;
        return (static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]);
      }
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

 private:
  int read_byte(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() +
                                                                 std::chrono::seconds(10)) {
    const int wait_ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count()));
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return -2;
    unsigned char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 1 ? c : -1;
  }
  int fd_ = -1;
};

class Faults : public ServerFixture {
 protected:
  void SetUp() override {
    server::ServerConfig config;
    config.pcm_input = true;
    config.max_message_bytes = 64 * 1024;
    config.idle_timeout_seconds = 2;
    config.max_sessions = 2;
    start(config);
  }
  // The server still does its job for a well-behaved client afterwards.
  void expect_still_serving() {
    ASSERT_TRUE(wait_idle());
    EXPECT_EQ(http_request(port_, "GET", "/health").status, 200);
    std::vector<int16_t> pcm = to_s16(tone(0.5, 0.2f));
    WsClient next(port_, "/asr");
    EXPECT_EQ(next.read().value()["type"], "config");
    next.send_pcm(pcm, 3200);
    next.send_end();
    std::vector<json> messages = next.read_until_stop();
    ASSERT_GE(messages.size(), 2u);
    EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(from_s16(pcm)));
    next.close();
  }
};

TEST_F(Faults, ClientGoneInTheMiddleOfAMessageFreesItsSession) {
  {
    RawWs ws(port_);
    ws.send_binary(std::string(3200, '\0'));
    ws.send_frame(0x82, std::string(1000, '\1'), 32000);  // announces 32000 bytes, sends 1000
  }                                                       // closed here, the frame unfinished
  expect_still_serving();
}

TEST_F(Faults, HalfClosedConnectionIsEndedAndFreed) {
  RawWs ws(port_);
  ws.send_binary(std::string(3200, '\0'));
  ws.shutdown_write();  // FIN without a close frame: no more data will come
  EXPECT_EQ(ws.read_close(), -1);
  expect_still_serving();
}

TEST_F(Faults, SilentConnectionIsEndedByTheIdleTimeoutWithItsFinalUpdate) {
  // A peer that vanished without a FIN (a half-open connection) looks like this one: nothing arrives.
  WsClient silent(port_, "/asr");
  silent.read();
  silent.send_pcm(to_s16(tone(0.6, 0.1f)), 3200);
  std::vector<json> messages = silent.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  EXPECT_EQ(silent.read(), std::nullopt);
  EXPECT_EQ(silent.close_code(), 1000);
  EXPECT_EQ(silent.close_reason(), "idle timeout");
  expect_still_serving();
}

TEST_F(Faults, UnmaskedClientFrameIsAProtocolError) {
  {
    RawWs ws(port_);
    ws.send_frame(0x82, std::string(100, '\0'), 100, /*masked=*/false);
    EXPECT_EQ(ws.read_close(), 1002);
  }  // the client hangs up after the close frame, as any peer does
  expect_still_serving();
}

TEST_F(Faults, ReservedOpcodeIsAProtocolError) {
  {
    RawWs ws(port_);
    ws.send_frame(0x83, "abc", 3);
    EXPECT_EQ(ws.read_close(), 1002);
  }  // the client hangs up after the close frame, as any peer does
  expect_still_serving();
}

TEST_F(Faults, FrameAnnouncingExabytesIsRefusedWithoutWaitingForThem) {
  {
    RawWs ws(port_);
    ws.send_frame(0x82, std::string(1000, '\0'), uint64_t{1} << 62);
    EXPECT_EQ(ws.read_close(), 1009);
  }  // the client hangs up after the close frame, as any peer does
  expect_still_serving();
}

TEST_F(Faults, InvalidUtf8TextIsRefused) {
  {
    RawWs ws(port_);
    ws.send_frame(0x81, "\xff\xfe", 2);
    EXPECT_EQ(ws.read_close(), 1007);
  }  // the client hangs up after the close frame, as any peer does
  // A large one (most of --max-message-kb): refused at its first bad byte, the rest of the
  // frame read and dropped, so the close frame arrives rather than a reset.
  {
    RawWs ws(port_);
    ws.send_frame(0x81, std::string(60000, '\xff'), 60000);
    EXPECT_EQ(ws.read_close(), 1007);
  }
  expect_still_serving();
}

TEST_F(Faults, TooManySessionsAreRefusedAndTheAdmittedOnesAreUnaffected) {
  std::vector<int16_t> a = to_s16(concat({tone(1.0, 0.1f), silence(6.0), tone(1.0, 0.3f)}));
  std::vector<int16_t> b = to_s16(tone(1.5, 0.2f));
  WsClient first(port_, "/asr"), second(port_, "/asr?mode=diff");
  EXPECT_EQ(first.read().value()["type"], "config");
  EXPECT_EQ(second.read().value()["type"], "config");
  first.send_pcm(std::vector<int16_t>(a.begin(), a.begin() + 16000), 3200);
  // Refused while both run: the protocol's error and 1013, no slot taken.
  for (int i = 0; i < 5; ++i) {
    WsClient refused(port_, "/asr");
    EXPECT_EQ(refused.read().value()["error"],
              "server busy: 2 sessions already running (--max-sessions); try again later");
    EXPECT_EQ(refused.read(), std::nullopt);
    EXPECT_EQ(refused.close_code(), 1013);
  }
  EXPECT_EQ(server_->active_sessions(), 2u);
  first.send_pcm(std::vector<int16_t>(a.begin() + 16000, a.end()), 3200);
  second.send_pcm(b, 3200);
  first.send_end();
  second.send_end();
  std::vector<json> ma = first.read_until_stop(), mb = second.read_until_stop();
  ASSERT_GE(ma.size(), 2u);
  EXPECT_EQ(ma[ma.size() - 2]["lines"], lines_alone(from_s16(a)));
  json lines = json::array();
  for (const json& m : mb) apply_update(lines, m);
  EXPECT_EQ(lines, lines_alone(from_s16(b)));
  EXPECT_NE(server_->metrics_text().find("earshot_refusals_total{reason=\"max_sessions\"} 5\n"), std::string::npos);
  first.close();
  second.close();
  expect_still_serving();
}

}  // namespace
}  // namespace earshot::testing

// What a server does when a client or the machine runs out of patience: a WebSocket
// client that never reads (bounded queue, write timeout), a shutdown whose grace ends
// before a backlog (the text so far as final, WhisperLiveKit and Deepgram), no file descriptors left (accept backs
// off, open connections are served), and more connections than --max-connections.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "../support/wait.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

class StreamLimits : public ServerFixture {};

TEST_F(StreamLimits, ClientThatNeverReadsHasABoundedQueueAndIsEnded) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.write_timeout_seconds = 0.5;
  config.send_buffer_bytes = 8192;
  start(config);
  // Full mode (every update carries every line), and small buffers at both ends: the
  // server's writes stall once a few KB are unread, however slowly updates come
  // (with the kernel's autotuning the buffers could take megabytes first).
  WsClient client(port_, "/asr", {}, 8192);
  ASSERT_EQ(client.read().value()["type"], "config");
  size_t max_queued = 0;
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  int chunk = 0;
  // Audio far faster than real time, never reading: the updates back up in the kernel's buffers.
  while (server_->active_sessions() > 0 && std::chrono::steady_clock::now() < deadline) {
    client.send_pcm(to_s16(tone(0.5, 0.05f + 0.001f * static_cast<float>(chunk++ % 100))), 16000);
    max_queued = std::max(max_queued, server_->send_queue_bytes());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(server_->active_sessions(), 0u) << "the stream was not ended";
  // One update in flight and at most one tick's worth behind it (updates here are a few KB).
  EXPECT_LT(max_queued, 256u * 1024) << max_queued;
  while (client.read()) {
  }
  EXPECT_EQ(client.close_code(), 1008);
  EXPECT_NE(client.close_reason().find("--write-timeout"), std::string::npos) << client.close_reason();
  EXPECT_NE(http_request(port_, "GET", "/metrics").body.find("earshot_streams_slow_client_total 1\n"),
            std::string::npos);
}

TEST_F(StreamLimits, ShutdownGraceOverSendsTheTextSoFarAsFinal) {
  server::ServerConfig config;
  config.pcm_input = true;
  const auto gate = grace_over_in_a_pass(config, 0.2);  // the gated pass outlasts the grace
  start(config, gated_hooks(gate));
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  client.send_pcm(to_s16(tone(20.0, 0.1f)), 16000);
  ASSERT_TRUE(gate->started.wait_for_at_least(11)) << "the model stopped before its eleventh pass";
  std::thread stopper([&] { server_->shutdown(); });
  std::vector<json> messages = client.read_until_stop();
  while (client.read()) {
  }
  stopper.join();
  const std::string committed = gate->committed();
  EXPECT_TRUE(gate->release()) << "the model's last pass never returned";
  EXPECT_EQ(lines_text(messages.at(messages.size() - 2)).rfind(committed, 0), 0u) << "every committed word";
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back(), json::parse(R"({"type":"ready_to_stop"})"));
  const json& final_update = messages[messages.size() - 2];
  EXPECT_FALSE(final_update.contains("type")) << final_update.dump();
  EXPECT_FALSE(final_update.contains("error")) << final_update.dump();
  EXPECT_EQ(final_update["buffer_transcription"], "");
  ASSERT_FALSE(final_update["lines"].empty()) << final_update.dump();
  // The committed words so far and the provisional tail, not the 40 words of the whole audio.
  const std::string text = final_update["lines"].back()["text"];
  const size_t words = static_cast<size_t>(std::count(text.begin(), text.end(), ' '));
  EXPECT_GT(words, 0u);
  EXPECT_LT(words, 40u) << text;
  EXPECT_EQ(client.close_code(), 1001);
  EXPECT_NE(client.close_reason().find("--shutdown-grace-s"), std::string::npos) << client.close_reason();
}

// The grace ends while a model pass runs: the final result waits for that pass (within
// --final-pass-wait) and carries its words; no pass starts after it.
TEST_F(StreamLimits, ShutdownGraceOverWaitsForTheRunningPass) {
  server::ServerConfig config;
  config.pcm_input = true;
  const auto gate = grace_over_in_a_pass(config, kHangGuard.count());  // the gated pass outlasts the grace
  start(config, gated_hooks(gate));
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  client.send_pcm(to_s16(tone(20.0, 0.1f)), 16000);
  ASSERT_TRUE(gate->started.wait_for_at_least(11)) << "the model stopped before its eleventh pass";
  std::thread stopper([&] { server_->shutdown(); });
  // The pass returns well after the grace (were the gate opened sooner, the stream would
  // simply go on, and every word would still have to be in its final result).
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    gate->gate.open();
  });
  std::vector<json> messages = client.read_until_stop();
  while (client.read()) {
  }
  stopper.join();
  opener.join();
  EXPECT_TRUE(gate->release());
  ASSERT_GE(messages.size(), 2u);
  const std::string committed = gate->committed();
  EXPECT_GE(gate->returned.value(), 11);
  EXPECT_EQ(lines_text(messages[messages.size() - 2]).rfind(committed, 0), 0u)
      << "lines: " << lines_text(messages[messages.size() - 2]) << "\ncommitted: " << committed;
  EXPECT_EQ(client.close_code(), 1001);
}

// Deepgram's /v1/listen the same way: the provisional tail as a last final Results
// (is_final, speech_final), then Metadata and the close.
// FakeProcessor's provisional " ~" is punctuation, which Deepgram's words drop: a word instead.
class TailProcessor : public GatedProcessor {
 public:
  using GatedProcessor::GatedProcessor;
  std::vector<Word> provisional() const override {
    std::vector<Word> words = GatedProcessor::provisional();
    for (Word& w : words) w.text = " tail";
    return words;
  }
};

TEST_F(StreamLimits, ShutdownGraceOverSendsDeepgramTheProvisionalTailAsFinal) {
  server::ServerConfig config;
  config.shutdown_grace_seconds = 0.3;
  config.final_pass_wait_seconds = 0.2;  // the gated pass outlasts it too
  config.stream.max_step_seconds = 0.2;
  config.idle_timeout_seconds = 10;  // a failure to see the interim ends the test sooner
  server::ServerHooks hooks = fake_hooks();
  auto gate = std::make_shared<PassGate>();
  hooks.make_processor = [gate](const server::ProcessorRequest&) -> std::unique_ptr<OnlineProcessor> {
    return std::make_unique<TailProcessor>(gate);
  };
  start(config, hooks);
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000&interim_results=true");
  client.send_pcm(to_s16(tone(1.3, 0.1f)), 3200);
  // Until the provisional word shows (the model is then between passes or in one).
  std::vector<json> messages;
  auto words_of = [](const json& m) { return m["channel"]["alternatives"][0]["words"]; };
  auto is_interim = [](const json& m) { return m["type"] == "Results" && !m["is_final"].get<bool>(); };
  while (messages.empty() || !is_interim(messages.back()) || words_of(messages.back()).empty() ||
         words_of(messages.back()).back()["word"] != "tail") {
    std::optional<json> m = client.read();
    ASSERT_TRUE(m.has_value()) << "closed before the interim; got " << json(messages).dump();
    messages.push_back(*m);
  }
  // Once the shutdown starts, the model's next pass outlasts the grace.
  gate->free_passes = gate->started.value();
  std::thread stopper([&] { server_->shutdown(); });
  while (std::optional<json> m = client.read()) messages.push_back(*m);
  stopper.join();
  EXPECT_TRUE(gate->release()) << "the model's last pass never returned";
  ASSERT_GE(messages.size(), 3u);
  EXPECT_EQ(messages.back()["type"], "Metadata");
  const json& last = messages[messages.size() - 2];
  EXPECT_EQ(last["type"], "Results");
  EXPECT_EQ(last["is_final"], true);
  EXPECT_EQ(last["speech_final"], true);
  // The last final is what the last interim showed: the provisional tail, now final.
  auto interim = std::find_if(messages.rbegin(), messages.rend(), is_interim);
  ASSERT_NE(interim, messages.rend());
  ASSERT_FALSE(words_of(last).empty()) << last.dump();
  EXPECT_EQ(words_of(last), words_of(*interim)) << last.dump();
  EXPECT_EQ(words_of(last).back()["word"], "tail");
  EXPECT_DOUBLE_EQ(last["start"].get<double>() + last["duration"].get<double>(),
                   words_of(last).back()["end"].get<double>());
  EXPECT_EQ(client.close_code(), 1001);
  EXPECT_NE(client.close_reason().find("--shutdown-grace-s"), std::string::npos) << client.close_reason();
}

int connect_to(int fd, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
}

// A request on a connected socket; its status ("" on timeout).
std::string get_health(int fd) {
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return "";
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buffer[4096];
  while (got.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return "";
    got.append(buffer, static_cast<size_t>(n));
  }
  // Drop the body so the next request on this socket reads its own answer.
  const size_t at = got.find("Content-Length: ");
  const size_t length = at == std::string::npos ? 0 : std::stoul(got.substr(at + 16));
  size_t have = got.size() - got.find("\r\n\r\n") - 4;
  while (have < length) {
    ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, length - have), 0);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  return got.substr(9, 3);
}

int highest_open_fd() {
  int highest = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') highest = std::max(highest, std::atoi(e->d_name));
  ::closedir(dir);
  return highest;
}

TEST_F(StreamLimits, OutOfFileDescriptorsAcceptBacksOffAndOpenConnectionsAreServed) {
  start();
  int keep = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect_to(keep, port_), 0);
  ASSERT_EQ(get_health(keep), "200");
  ::testing::internal::CaptureStderr();
  rlimit original{};
  ::getrlimit(RLIMIT_NOFILE, &original);
  rlimit low = original;
  low.rlim_cur = static_cast<rlim_t>(highest_open_fd() + 4);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  // Every descriptor taken, then two of them connected: the server has none to accept them with.
  std::vector<int> sockets;
  for (int fd; (fd = ::socket(AF_INET, SOCK_STREAM, 0)) >= 0;) sockets.push_back(fd);
  EXPECT_EQ(errno, EMFILE);
  ASSERT_GE(sockets.size(), 2u);
  const uint64_t before = server_->accept_attempts();
  for (size_t i = 0; i < 2; ++i) ASSERT_EQ(connect_to(sockets[i], port_), 0);
  // Each failed accept waits before the next, twice as long each time (50, 100, 200, 400 ms,
  // up to 1 s): a spinning loop would make thousands of attempts instead.
  ASSERT_TRUE(eventually([&] { return server_->accept_retry_waits_ms().size() >= 4; }))
      << "accept did not fail and retry four times";
  const uint64_t attempts = server_->accept_attempts() - before;
  const std::vector<int> waits = server_->accept_retry_waits_ms();
  EXPECT_EQ(std::vector<int>(waits.begin(), waits.begin() + 4), (std::vector<int>{50, 100, 200, 400}));
  // Every attempt but the one pending when the descriptors ran out came after a wait.
  EXPECT_GE(attempts, 1u);
  EXPECT_LE(attempts, waits.size() + 1) << waits.size() << " waits";
  EXPECT_EQ(get_health(keep), "200");

  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &original), 0);
  for (size_t i = 2; i < sockets.size(); ++i) ::close(sockets[i]);
  // The waiting connections are accepted at the next retry (at most 1 s away).
  EXPECT_EQ(get_health(sockets[0]), "200");
  EXPECT_EQ(get_health(sockets[1]), "200");
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t episodes = 0;
  for (size_t at = 0; (at = log.find("cannot accept new connections", at)) != std::string::npos; ++at) ++episodes;
  EXPECT_EQ(episodes, 1u) << log;
  EXPECT_NE(log.find("accepting connections again"), std::string::npos) << log;
  ::close(sockets[0]);
  ::close(sockets[1]);
  ::close(keep);
}

// Everything a connection sends until the server closes it; `eof` says whether it did (within 3 s).
std::string read_to_close(int fd, bool& eof) {
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) got.append(buffer, static_cast<size_t>(n));
  eof = n == 0;
  return got;
}

TEST_F(StreamLimits, ConnectionsBeyondMaxConnectionsAreRefusedAtOnceAndHeldOnesServed) {
  server::ServerConfig config;
  config.max_connections = 4;
  ::testing::internal::CaptureStderr();
  start(config);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(connect_to(held.back(), port_), 0);
    ASSERT_EQ(get_health(held.back()), "200");  // accepted, then left idle (keep-alive)
  }
  // Two more: each gets a 503 at once and is closed, without sending anything.
  for (int i = 0; i < 2; ++i) {
    int extra = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect_to(extra, port_), 0);
    bool eof = false;
    const std::string answer = read_to_close(extra, eof);
    EXPECT_TRUE(eof) << "not closed by the server";
    EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
    EXPECT_NE(answer.find("Retry-After: 1\r\n"), std::string::npos) << answer;
    EXPECT_NE(answer.find("--max-connections"), std::string::npos) << answer;
    ::close(extra);
  }
  // Refusing is one accept per connection: nothing runs while none arrives. One accept
  // at the start and one after each of the 4 held and 2 refused connections (the one
  // after the last refusal follows its close)...
  ASSERT_TRUE(eventually([&] { return server_->accept_attempts() >= 7; })) << server_->accept_attempts();
  for (int fd : held) EXPECT_EQ(get_health(fd), "200");
  EXPECT_NE(server_->metrics_text().find("earshot_refusals_total{reason=\"max_connections\"} 2\n"), std::string::npos)
      << server_->metrics_text();
  // ... and still 7 after the server answered those requests: the loop did not spin.
  EXPECT_EQ(server_->accept_attempts(), 7u);

  ::close(held[0]);
  held.erase(held.begin());
  // The server frees the slot once it sees the close: a new connection is served then.
  ASSERT_TRUE(eventually([&] { return server_->open_connections() == 3; })) << server_->open_connections();
  held.push_back(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(connect_to(held.back(), port_), 0);
  EXPECT_EQ(get_health(held.back()), "200");
  const std::string log = ::testing::internal::GetCapturedStderr();
  size_t episodes = 0;
  for (size_t at = 0; (at = log.find("refusing new connections", at)) != std::string::npos; ++at) ++episodes;
  EXPECT_EQ(episodes, 1u) << log;
  EXPECT_NE(log.find("serving new connections again"), std::string::npos) << log;
  for (int fd : held) ::close(fd);
}

}  // namespace
}  // namespace earshot::testing

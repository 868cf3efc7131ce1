// Admission and limits of POST /v1/audio/transcriptions: the session slot is taken
// before the upload is decoded (429 with Retry-After when the server is full), the
// decoded length is capped (413), and no transcription thread outlives the server.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "audio/audio.h"
#include "server/worker_pool.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::string jfk_bytes() {
  std::ifstream in(EARSHOT_SHARED_DIR "/data/jfk.wav", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

HttpResult upload(uint16_t port, const std::string& file) {
  std::string body = "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" + file +
                     "\r\n--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--B--\r\n";
  return http_request(port, "POST", "/v1/audio/transcriptions", body,
                      {{"Content-Type", "multipart/form-data; boundary=B"}});
}

// Threads of this process now (Linux).
int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

class HttpLimits : public ServerFixture {
 protected:
  void start_with(server::ServerConfig config, server::ServerHooks hooks = fake_hooks()) {
    config.pcm_input = true;
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start(config, hooks);
  }
};

TEST_F(HttpLimits, FullServerRefusesBeforeDecoding) {
  server::ServerConfig config;
  config.max_sessions = 1;
  start_with(config);
  WsClient stream(port_, "/asr");
  ASSERT_EQ(stream.read().value()["type"], "config");
  // Undecodable bytes: a server that decoded first would answer 400 "cannot decode".
  HttpResult busy = upload(port_, std::string(5000, 'z'));
  EXPECT_EQ(busy.status, 429) << busy.body;
  EXPECT_EQ(busy.header("Retry-After"), "1");
  EXPECT_EQ(json::parse(busy.body)["error"]["message"],
            "server busy: 1 sessions running (--max-sessions); retry later");
  HttpResult metrics = http_request(port_, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("earshot_sessions_refused_total 1\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("earshot_sessions_total{kind=\"file\"} 0\n"), std::string::npos) << metrics.body;

  stream.send_end();
  stream.read_until_stop();
  stream.close();
  ASSERT_TRUE(wait_idle());
  HttpResult garbage = upload(port_, std::string(5000, 'z'));
  EXPECT_EQ(garbage.status, 400) << garbage.body;
  EXPECT_EQ(upload(port_, jfk_bytes()).status, 200);
  EXPECT_TRUE(wait_idle());
}

TEST_F(HttpLimits, DecodedDurationIsCapped) {
  server::ServerConfig config;
  config.max_audio_seconds = 5;  // jfk.wav is 11 s
  start_with(config);
  HttpResult r = upload(port_, jfk_bytes());
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "'a.wav': audio longer than this server's limit of 5 s of decoded audio per file");
  EXPECT_TRUE(wait_idle());  // the slot came back
  HttpResult metrics = http_request(port_, "GET", "/metrics");
  EXPECT_NE(metrics.body.find("earshot_sessions_total{kind=\"file\"} 0\n"), std::string::npos) << metrics.body;
}

TEST_F(HttpLimits, DurationUnderTheCapIsTranscribed) {
  server::ServerConfig config;
  config.max_audio_seconds = 12;
  start_with(config);
  HttpResult r = upload(port_, jfk_bytes());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(json::parse(r.body)["text"].get<std::string>().empty());
}

TEST_F(HttpLimits, NoTranscriptionThreadOutlivesTheServer) {
  const int before = thread_count();
  ASSERT_GT(before, 0);
  server::ServerConfig config;
  config.max_sessions = 3;
  auto hooks = fake_hooks();
  std::atomic<bool> slow{true};
  hooks.make_processor = [&slow](const server::ProcessorRequest&) -> std::unique_ptr<OnlineProcessor> {
    FakeProcessor::Hooks h;
    h.on_process = [&slow] {
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    };
    return std::make_unique<FakeProcessor>(h);
  };
  start_with(config, hooks);
  const std::string file = jfk_bytes();
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < 3; ++i)
    clients.emplace_back([&] {
      try {
        upload(port_, file);
      } catch (const std::exception&) {
        // The server going away mid-request is what this test does.
      }
      ++answered;
    });
  EXPECT_TRUE(eventually([&] { return server_->active_sessions() == 3; })) << server_->active_sessions();
  server_.reset();  // mid-transcription: every job is joined, none detached
  slow = false;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered, 3);
  EXPECT_EQ(thread_count(), before);
}

TEST(WorkerPool, BoundedThreadsRunEveryJobAndJoin) {
  server::WorkerPool pool(2);
  std::atomic<int> ran{0}, running{0}, most{0};
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(pool.post([&] {
      int now = ++running;
      for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
      ++ran;
    }));
  EXPECT_LE(pool.threads(), 2u);
  pool.stop();  // runs what is queued, then joins
  EXPECT_EQ(ran, 10);
  EXPECT_LE(most, 2);
  EXPECT_EQ(pool.threads(), 0u);
  EXPECT_FALSE(pool.post([] {}));
}

}  // namespace
}  // namespace earshot::testing

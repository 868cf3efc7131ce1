// Audio a client sends is never lost without a word: a client sending faster than
// real time (a recording streamed as fast as it goes) is held back by backpressure
// and gets every word; a client paced in real time whose server falls behind loses
// the oldest waiting audio, and is told so in its protocol's terms.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

// 20 s of speech whose words (one per 0.5 s) all differ, so a lost or repeated
// stretch shows in the text.
std::vector<float> varied_speech(int half_seconds = 40) {
  std::vector<float> out;
  for (int i = 0; i < half_seconds; ++i) {
    std::vector<float> part = tone(0.5, 0.05f + 0.005f * static_cast<float>(i));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

double metric_value(const std::string& page, const std::string& name) {
  const size_t at = page.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(page.substr(at + name.size() + 2));
}

class Flow : public ServerFixture {};

TEST_F(Flow, AClientSendingFasterThanRealTimeIsHeldBackAndGetsEveryWord) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.stream.max_pending_seconds = 2.0;
  config.stream.max_step_seconds = 0.5;
  auto gate = std::make_shared<PassGate>();
  gate->free_passes = 0;  // the model waits until the transport has stopped reading
  start(config, gated_hooks(gate));
  const std::vector<float> audio = varied_speech();
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  std::thread opener([&] {
    EXPECT_TRUE(eventually([&] {
      return metric_value(server_->metrics_text(), "earshot_stream_read_pauses_total") >= 1;
    })) << server_->metrics_text();
    gate->gate.open();
  });
  // All of it at once: the sends block while the server does not read.
  client.send_pcm(to_s16(audio), 3200);
  client.send_end();
  opener.join();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["lines"], lines_alone(from_s16(to_s16(audio)))) << final_update.dump();
  EXPECT_FALSE(final_update.contains("skipped_seconds")) << final_update.dump();
  client.close();
  EXPECT_TRUE(wait_idle());
  const std::string page = server_->metrics_text();
  EXPECT_EQ(metric_value(page, "earshot_audio_skipped_seconds_total"), 0) << page;
  EXPECT_DOUBLE_EQ(metric_value(page, "earshot_audio_received_seconds_total"), 20.0) << page;
}

// The same over Deepgram's /v1/listen: every word in the finals, none skipped.
TEST_F(Flow, ADeepgramClientSendingFasterThanRealTimeGetsEveryWord) {
  server::ServerConfig config;
  config.stream.max_pending_seconds = 2.0;
  config.stream.max_step_seconds = 0.5;
  auto gate = std::make_shared<PassGate>();
  gate->free_passes = 0;
  start(config, gated_hooks(gate));
  const std::vector<float> audio = varied_speech();
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000");
  std::thread opener([&] {
    EXPECT_TRUE(
        eventually([&] { return metric_value(server_->metrics_text(), "earshot_stream_read_pauses_total") >= 1; }));
    gate->gate.open();
  });
  client.send_pcm(to_s16(audio), 3200);
  client.send_text(R"({"type":"CloseStream"})");
  opener.join();
  std::string finals;
  json metadata;
  while (std::optional<json> m = client.read()) {
    EXPECT_NE((*m)["type"], "Warning") << m->dump();
    if ((*m)["type"] == "Metadata") metadata = *m;
    if ((*m)["type"] == "Results" && (*m)["is_final"].get<bool>())
      for (const json& w : (*m)["channel"]["alternatives"][0]["words"]) finals += " " + w["word"].get<std::string>();
  }
  std::string alone;
  for (const json& line : lines_alone(from_s16(to_s16(audio)))) alone += line["text"].get<std::string>();
  EXPECT_EQ(finals, alone);
  EXPECT_EQ(client.close_code(), 1000);
  EXPECT_FALSE(metadata.contains("skipped_seconds")) << metadata.dump();
}

// A client paced in real time (the server's clock advances a second per second of
// audio) while the model is stuck: the oldest audio beyond --max-buffered-seconds is
// skipped, shown as a skipped silence line and counted in the final update.
TEST_F(Flow, AClientPacedInRealTimeWhoseServerFellBehindIsToldWhatWasSkipped) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.stream.max_pending_seconds = 2.0;
  config.stream.max_step_seconds = 0.5;
  auto clock = std::make_shared<std::atomic<int64_t>>(0);  // ms
  auto gate = std::make_shared<PassGate>();
  gate->free_passes = 0;
  server::ServerHooks hooks = gated_hooks(gate);
  hooks.now = [clock] { return std::chrono::steady_clock::time_point(std::chrono::milliseconds(clock->load())); };
  start(config, hooks);
  const std::vector<float> audio = varied_speech(20);  // 10 s
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  const std::vector<int16_t> pcm = to_s16(audio);
  for (size_t i = 0; i < pcm.size(); i += 16000) {
    client.send_pcm(std::vector<int16_t>(pcm.begin() + static_cast<std::ptrdiff_t>(i),
                                         pcm.begin() + static_cast<std::ptrdiff_t>(std::min(pcm.size(), i + 16000))),
                    32000);
    ASSERT_TRUE(eventually([&] {
      return metric_value(server_->metrics_text(), "earshot_audio_received_seconds_total") >=
             static_cast<double>(i + 16000) / 16000.0 - 1e-9;
    }));
    // The model's first pass takes the first 0.5 s (a step) and stays stuck at the gate.
    if (i == 0) {
      ASSERT_TRUE(gate->started.wait_for_at_least(1));
    }
    *clock += 1000;
  }
  gate->gate.open();
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  const json& final_update = messages[messages.size() - 2];
  // 10 s received: the first step's 0.5 s went to the model, the last 2 s waited, the
  // 7.5 s between were skipped: one line, between the words before and after it.
  EXPECT_DOUBLE_EQ(final_update["skipped_seconds"].get<double>(), 7.5) << final_update.dump();
  const json& lines = final_update["lines"];
  ASSERT_EQ(lines.size(), 3u) << final_update.dump();
  EXPECT_EQ(lines[1],
            json::parse(R"({"speaker":-2,"text":"","start":"0:00:00.50","end":"0:00:08.00","skipped":true})"));
  EXPECT_EQ(lines[0]["end"], "0:00:00.50");
  EXPECT_EQ(lines[2]["start"], "0:00:08.00");
  EXPECT_EQ(lines[2]["end"], "0:00:10.00");
  client.close();
  EXPECT_TRUE(wait_idle());
  EXPECT_DOUBLE_EQ(metric_value(server_->metrics_text(), "earshot_audio_skipped_seconds_total"), 7.5);
}

}  // namespace
}  // namespace earshot::testing

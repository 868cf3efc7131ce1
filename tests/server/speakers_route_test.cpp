// Speakers on the wire: the server given a diarization chain (its registry entry
// over the scripted activity source, as serve builds chains) and no other edit.
// WhisperLiveKit's lines split at the speaker change; Deepgram's words carry
// `speaker` (from 0) with diarize=true and none without; the OpenAI file route's
// verbose_json segments carry it, and diarized_json has OpenAI's shape with
// speakers "A", "B"; /health and /metrics name the stage.
#include <gtest/gtest.h>

#include <thread>

#include "../stages/scripted_activity.h"
#include "stages/diarization/registration.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;
namespace dz = stages::diarization;

// Speaker 0 talks for the first 2 s, speaker 1 after; the activity comes in chunks of
// `chunk_seconds` of audio.
class Speakers : public ServerFixture {
 protected:
  void SetUp() override { start_diarized(server::ServerConfig{}, fake_hooks()); }
  void start_diarized(server::ServerConfig config, server::ServerHooks hooks, double chunk_seconds = 1.0) {
    const std::vector<stages::StageDefinition> registry = {
        dz::stage_definition([chunk_seconds](const dz::ModelRequest&) -> dz::SourceFactory {
          return [chunk_seconds] {
            return std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 2, 0}, {2, 100, 1}}, chunk_seconds);
          };
        })};
    Args args("serve", "");
    stages::StageChain::declare(args, stages::Command::kServe, registry);
    args.parse({"--diarization-model", "scripted"});
    chain_ = std::make_shared<const stages::StageChain>(
        stages::StageChain::load(args, {.command = stages::Command::kServe}, registry));
    config.pcm_input = true;
    config.stages = chain_->names();
    hooks.make_stages = [chain = chain_](const stages::StreamRequest& r) { return chain->open(r); };
    hooks.stage_metrics = [chain = chain_] { return chain->metrics(); };
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start(config, hooks);
  }
  std::shared_ptr<const stages::StageChain> chain_;
};

// A server stopping before the diarizer named the speakers (its shutdown grace over):
// the final update still carries every committed word, in the lines, without a speaker.
class SpeakersAtShutdown : public Speakers {
 protected:
  void SetUp() override {}
};

TEST_F(SpeakersAtShutdown, TheForcedFinalKeepsEveryCommittedWord) {
  server::ServerConfig config;
  const auto gate = grace_over_in_a_pass(config, 0.2);  // the gated pass outlasts the grace
  start_diarized(config, gated_hooks(gate), 100.0);     // no speaker before the end
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
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  const json& final_update = messages[messages.size() - 2];
  EXPECT_FALSE(committed.empty());
  EXPECT_EQ(final_update["buffer_diarization"], "") << final_update.dump();
  EXPECT_EQ(lines_text(final_update).rfind(committed, 0), 0u)
      << "lines: " << lines_text(final_update) << "\ncommitted: " << committed;
  EXPECT_EQ(client.close_code(), 1001);
}

std::vector<std::pair<std::string, int>> deepgram_finals(WsClient& client) {
  std::vector<std::pair<std::string, int>> words;
  while (auto m = client.read()) {
    if ((*m)["type"] != "Results" || !(*m)["is_final"].get<bool>()) continue;
    for (const json& w : (*m)["channel"]["alternatives"][0]["words"])
      words.push_back({w["word"], w.contains("speaker") ? w["speaker"].get<int>() : -1});
  }
  return words;
}

TEST_F(Speakers, WhisperLiveKitLinesSplitAtTheSpeakerChange) {
  WsClient client(port_, "/asr?language=en");
  ASSERT_TRUE(client.read());  // config
  client.send_pcm(to_s16(tone(4.0, 0.1f)), 3200);
  client.send_end();
  const std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["lines"], json::parse(R"([
    {"speaker":1,"text":" w100 w100 w100 w100","start":"0:00:00.00","end":"0:00:02.00","detected_language":"en"},
    {"speaker":2,"text":" w100 w100 w100 w100","start":"0:00:02.00","end":"0:00:04.00","detected_language":"en"}])"));
  EXPECT_EQ(final_update["buffer_diarization"], "");
  client.close();
  EXPECT_TRUE(wait_idle());
  const json health = json::parse(http_request(port_, "GET", "/health", "").body);
  EXPECT_EQ(health["diarization"], true);
  const std::string metrics = http_request(port_, "GET", "/metrics", "").body;
  EXPECT_NE(metrics.find("earshot_diarization_words_total 8"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("earshot_diarization_dropped_seconds_total 0"), std::string::npos);
}

TEST_F(Speakers, DeepgramWordsCarryTheSpeakerWhenAsked) {
  const std::vector<int16_t> pcm = to_s16(tone(4.0, 0.1f));
  WsClient diarized(port_, "/v1/listen?encoding=linear16&sample_rate=16000&diarize=true");
  diarized.send_pcm(pcm, 3200);
  diarized.send_text(R"({"type":"CloseStream"})");
  const auto words = deepgram_finals(diarized);
  ASSERT_EQ(words.size(), 8u);
  for (size_t i = 0; i < words.size(); ++i) EXPECT_EQ(words[i].second, i < 4 ? 0 : 1) << i;
  WsClient plain(port_, "/v1/listen?encoding=linear16&sample_rate=16000");
  plain.send_pcm(pcm, 3200);
  plain.send_text(R"({"type":"CloseStream"})");
  const auto unattributed = deepgram_finals(plain);
  ASSERT_EQ(unattributed.size(), 8u);
  for (const auto& w : unattributed) EXPECT_EQ(w.second, -1);
  EXPECT_TRUE(wait_idle());
}

TEST_F(Speakers, FileRoutesCarrySpeakers) {
  const std::vector<int16_t> pcm = to_s16(tone(4.0, 0.1f));
  const std::string raw(reinterpret_cast<const char*>(pcm.data()), pcm.size() * 2);
  HttpResult r = http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000&diarize=true", raw);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = json::parse(r.body);
  const json& words = body["results"]["channels"][0]["alternatives"][0]["words"];
  ASSERT_EQ(words.size(), 8u) << r.body;
  EXPECT_EQ(words[0]["speaker"], 0);
  EXPECT_EQ(words[7]["speaker"], 1);
  // OpenAI's verbose_json: a segment per speaker turn, with its speaker.
  const std::string body_parts = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
                                 wav_file_bytes(pcm) +
                                 "\r\n--b\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n"
                                 "verbose_json\r\n--b--\r\n";
  HttpResult openai = http_request(port_, "POST", "/v1/audio/transcriptions", body_parts,
                                   {{"Content-Type", "multipart/form-data; boundary=b"}});
  ASSERT_EQ(openai.status, 200) << openai.body;
  const json verbose = json::parse(openai.body);
  ASSERT_EQ(verbose["segments"].size(), 2u);
  EXPECT_EQ(verbose["segments"][0]["speaker"], 1);
  EXPECT_EQ(verbose["segments"][1]["speaker"], 2);
  // OpenAI's diarized_json (CreateTranscriptionResponseDiarizedJson).
  std::string diarized_parts = body_parts;
  diarized_parts.replace(diarized_parts.find("verbose_json"), 12, "diarized_json");
  HttpResult dj = http_request(port_, "POST", "/v1/audio/transcriptions", diarized_parts,
                               {{"Content-Type", "multipart/form-data; boundary=b"}});
  ASSERT_EQ(dj.status, 200) << dj.body;
  const json diarized = json::parse(dj.body);
  EXPECT_EQ(diarized["task"], "transcribe");
  EXPECT_EQ(diarized["text"], verbose["text"]);
  EXPECT_EQ(diarized["duration"], verbose["duration"]);
  EXPECT_EQ(diarized["usage"]["type"], "duration");
  ASSERT_EQ(diarized["segments"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& s = diarized["segments"][i];
    EXPECT_EQ(s["type"], "transcript.text.segment");
    EXPECT_EQ(s["id"], "seg_" + std::to_string(i));
    EXPECT_EQ(s["start"], verbose["segments"][i]["start"]);
    EXPECT_EQ(s["end"], verbose["segments"][i]["end"]);
    EXPECT_EQ(s["text"], verbose["segments"][i]["text"]);
  }
  EXPECT_EQ(diarized["segments"][0]["speaker"], "A");
  EXPECT_EQ(diarized["segments"][1]["speaker"], "B");
  EXPECT_TRUE(wait_idle());
}

}  // namespace
}  // namespace earshot::testing

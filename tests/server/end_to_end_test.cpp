// The whole server with the real pieces: a random-weight Whisper model (tiny
// dimensions) behind AlignAtt, Silero VAD with the shared weights, FFmpeg
// decoding of a webm/opus stream. Random weights say nothing about words, so
// this checks structure and determinism: the protocol sequence, and that two
// streams at once get exactly what each gets alone.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "../engine/engine_test_util.h"
#include "audio/audio.h"
#include "server/model_counters.h"
#include "session/silero_vad.h"
#include "test_support.h"
#include "vad/vad.h"

namespace earshot::testing {
namespace {

using nlohmann::json;
const std::string kShared = EARSHOT_SHARED_DIR;

std::vector<uint8_t> jfk_webm() {
  auto out = std::filesystem::temp_directory_path() / ("earshot-e2e-" + std::to_string(::getpid()) + ".webm");
  std::string cmd =
      "ffmpeg -nostdin -loglevel error -y -i " + kShared + "/data/jfk.wav -c:a libopus -f webm " + out.string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("ffmpeg failed");
  std::ifstream in(out, std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(out);
  return bytes;
}

class EndToEnd : public ServerFixture {
 protected:
  void SetUp() override {
    engine::ModelSpec spec;
    spec.runtime.threads = 1;
    engine_ = engine::testing::load_random_engine(whisper::testing::pipeline_spec(/*seed=*/11), "server-e2e", spec);
    vad_ = vad::VadModel::load(kShared + "/models/silero-v6.2.0-ggml.bin");
    counters_ = std::make_shared<server::ModelCounters>();
    hooks_.make_processor = [this](const server::ProcessorRequest& r) -> std::unique_ptr<OnlineProcessor> {
      engine::StreamRequest request;
      request.language = r.language;
      request.keyterms = r.keyterms;
      request.on_pass = server::count_passes(counters_);
      request.on_warning = [](const std::string&) {};
      return engine_->open_stream(request);
    };
    hooks_.make_vad = session::silero_vad_factory(vad_);
    hooks_.make_decoder = [] { return audio::StreamDecoder::create(); };
    hooks_.model_times = [this] { return counters_->times(); };
    server::ServerConfig config;
    config.workers = 2;
    // Fixed 1 s steps: a stream that falls behind would otherwise take bigger
    // steps (by design), and how far behind it falls depends on the machine's
    // load, so equality with the lone run would be timing-dependent; so would a
    // pass stopped in flight.
    config.stream.min_step_seconds = config.stream.max_step_seconds = 1.0;
    config.stream.stop_passes = false;
    stream_options_ = config.stream;
    start(config, hooks_);
  }

  json stream(const std::vector<uint8_t>& webm) {
    WsClient client(port_, "/asr?language=en");
    EXPECT_EQ(client.read().value()["type"], "config");
    for (size_t i = 0; i < webm.size(); i += 1600)
      client.send_binary(
          std::vector<uint8_t>(webm.begin() + static_cast<std::ptrdiff_t>(i),
                               webm.begin() + static_cast<std::ptrdiff_t>(std::min(webm.size(), i + 1600))));
    client.send_end();
    std::vector<json> messages = client.read_until_stop();
    EXPECT_GE(messages.size(), 2u);
    EXPECT_EQ(messages.back()["type"], "ready_to_stop");
    client.close();
    return messages.size() >= 2 ? messages[messages.size() - 2] : json();
  }

  json alone(const std::vector<uint8_t>& webm) {
    auto decoder = audio::StreamDecoder::create();
    std::vector<float> pcm = decoder->push(webm);
    auto tail = decoder->finish();
    pcm.insert(pcm.end(), tail.begin(), tail.end());
    session::StreamSession s(hooks_.make_processor({"en", {}}), hooks_.make_vad(), stream_options_);
    s.push_audio(pcm);
    s.end_of_stream();
    while (s.has_work()) s.step();
    return protocol::wlk::full_update(protocol::wlk::snapshot_of(s));
  }

  std::shared_ptr<const engine::Engine> engine_;
  std::shared_ptr<const vad::VadModel> vad_;
  std::shared_ptr<server::ModelCounters> counters_;
  server::ServerHooks hooks_;
  session::StreamOptions stream_options_;
};

TEST_F(EndToEnd, WebmStreamsThroughAlignAttTwoAtOnceEqualAlone) {
  std::vector<uint8_t> webm = jfk_webm();
  json expected = alone(webm);
  const uint64_t passes_alone = counters_->encoder_passes.load();
  EXPECT_GT(passes_alone, 0u);
  auto a = std::async(std::launch::async, [&] { return stream(webm); });
  auto b = std::async(std::launch::async, [&] { return stream(webm); });
  json ra = a.get(), rb = b.get();
  EXPECT_EQ(ra["lines"], expected["lines"]);
  EXPECT_EQ(rb["lines"], expected["lines"]);
  EXPECT_NE(ra["status"], "error");
  for (const json& line : ra["lines"]) {
    EXPECT_TRUE(line["speaker"] == 1 || line["speaker"] == -2);
    EXPECT_LE(line["start"].get<std::string>(), line["end"].get<std::string>());
  }
  EXPECT_TRUE(wait_idle());
  std::string metrics = server_->metrics_text();
  EXPECT_NE(metrics.find("earshot_encoder_passes_total"), std::string::npos);
  EXPECT_GT(counters_->encoder_passes.load(), passes_alone);
  EXPECT_NE(metrics.find("earshot_sessions_total{kind=\"websocket\"} 2\n"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace earshot::testing

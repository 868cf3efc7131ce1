// A family the commands have never heard of (the tests' "ticks" family) streams
// through `transcribe` and `serve` exactly as they are: nothing above the
// engine boundary knows which family it runs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../model/model_test_util.h"
#include "../server/test_support.h"
#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/serve.h"
#include "fake_family.h"

namespace earshot::engine::testing {
namespace {

using whisper::testing::TempDir;

const std::string kShared = EARSHOT_SHARED_DIR;

class Surfaces : public earshot::testing::ServerFixture {
 protected:
  void SetUp() override {
    register_ticks_family();
    write_gguf_with_architecture(model_, kTicksArchitecture);
  }
  TempDir dir_{"surfaces"};
  std::filesystem::path model_ = dir_ / "ticks.gguf";
};

TEST_F(Surfaces, TranscribeRunsTheFamilyUnchanged) {
  const std::filesystem::path out = dir_ / "out.json";
  const std::string wav = kShared + "/data/jfk.wav";
  ASSERT_EQ(cli::run_transcribe({wav, "--model", model_.string(), "--format", "json", "--output", out.string(),
                                 "--language", "de", "--chunk", "0.5"}),
            0);
  std::ifstream in(out);
  const nlohmann::json result = nlohmann::json::parse(in);
  const size_t ticks = audio::load_file(wav).size() / 8000;  // a word per half second
  std::string expected;
  for (size_t i = 1; i <= ticks; ++i) expected += (i > 1 ? " tick" : "tick") + std::to_string(i);
  EXPECT_EQ(result["text"], expected);
  EXPECT_EQ(result["language"], "de");
  ASSERT_EQ(result["words"].size(), ticks);
  EXPECT_DOUBLE_EQ(result["words"][3]["start"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(result["words"][3]["end"].get<double>(), 2.0);
}

TEST_F(Surfaces, ServeStreamsTheFamilyUnchanged) {
  std::optional<cli::ServeSetup> setup =
      cli::prepare_serve({"--model", model_.string(), "--no-pull", "--no-vac", "--pcm-input", "--threads", "1"});
  ASSERT_TRUE(setup);
  EXPECT_EQ(setup->config.model_id, "ticks-test");
  start(setup->config, setup->hooks);

  const earshot::testing::HttpResult models = earshot::testing::http_request(port_, "GET", "/v1/models");
  EXPECT_NE(models.body.find("\"ticks-test\""), std::string::npos) << models.body;

  earshot::testing::WsClient client(port_, "/asr?language=en");
  ASSERT_TRUE(client.read());  // config
  client.send_pcm(earshot::testing::to_s16(std::vector<float>(32000, 0.1f)), 3200);
  client.send_end();
  const std::vector<nlohmann::json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  const nlohmann::json& last = messages[messages.size() - 2];
  ASSERT_EQ(last["lines"].size(), 1u) << last.dump();
  EXPECT_EQ(last["lines"][0]["text"], " tick1 tick2 tick3 tick4");
  EXPECT_EQ(last["lines"][0]["end"], "0:00:02.00");
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");

  earshot::testing::WsClient german(port_, "/asr?language=fr");
  std::optional<nlohmann::json> refused = german.read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->value("error", ""), "unknown language code 'fr'") << refused->dump();
}

TEST_F(Surfaces, ServeWritesEachStreamsPassTraceWhenAsked) {
  const std::filesystem::path whisper_model = dir_ / "whisper.bin";
  whisper::write_random_model(whisper::testing::pipeline_spec(/*seed=*/5), whisper_model);
  const std::filesystem::path traces = dir_ / "traces";
  std::optional<cli::ServeSetup> setup =
      cli::prepare_serve({"--model", whisper_model.string(), "--no-pull", "--no-vac", "--pcm-input", "--threads", "1",
                          "--trace-dir", traces.string()});
  ASSERT_TRUE(setup);
  start(setup->config, setup->hooks);
  std::vector<float> pcm = audio::load_file(kShared + "/data/jfk.wav");
  pcm.resize(2 * 16000);
  {
    earshot::testing::WsClient client(port_, "/asr?language=en");
    ASSERT_TRUE(client.read());  // config
    client.send_pcm(earshot::testing::to_s16(pcm), 3200);
    client.send_end();
    client.read_until_stop();
  }
  ASSERT_TRUE(wait_idle());
  // stream-1 is the warm-up stream (its passes are never traced); the client's is stream-2.
  std::ifstream in(traces / "stream-2.jsonl");
  ASSERT_TRUE(in) << "no trace file for the stream";
  std::string line;
  int passes = 0;
  while (std::getline(in, line)) {
    const nlohmann::json pass = nlohmann::json::parse(line);
    EXPECT_EQ(pass["pass"], passes) << line;
    EXPECT_TRUE(pass.contains("stop") && pass.contains("prompt") && pass.contains("tokens")) << line;
    ++passes;
  }
  EXPECT_GT(passes, 0);
}

}  // namespace
}  // namespace earshot::engine::testing

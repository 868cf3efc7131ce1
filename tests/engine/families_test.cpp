// engine::load picks a family from the file; a family registered by a test is
// loaded like a built-in one; unreadable files are named, not guessed at.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <thread>

#include "common/error.h"
#include "engine/transducer/options.h"
#include "engine/whisper/options.h"
#include "engine_test_util.h"
#include "fake_family.h"

namespace earshot::engine::testing {
namespace {

using whisper::testing::TempDir;

std::string error_of(const std::function<void()>& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(ProbeModelFile, TellsLegacyGgmlGgufAndOtherFilesApart) {
  TempDir dir("probe");
  whisper::write_random_model(whisper::testing::pipeline_spec(1), dir / "model.bin");
  EXPECT_EQ(probe_model_file(dir / "model.bin").kind, ModelFileKind::kGgmlWhisper);

  write_gguf_with_architecture(dir / "llama.gguf", "llama");
  const ModelFile gguf = probe_model_file(dir / "llama.gguf");
  EXPECT_EQ(gguf.kind, ModelFileKind::kGguf);
  EXPECT_EQ(gguf.architecture, "llama");
  EXPECT_NE(gguf.description.find("architecture 'llama'"), std::string::npos) << gguf.description;

  write_text(dir / "page.bin", "<!DOCTYPE html><html>rate limited</html>");
  EXPECT_NE(probe_model_file(dir / "page.bin").description.find("HTML"), std::string::npos);
  write_text(dir / "empty.bin", "");
  EXPECT_EQ(probe_model_file(dir / "empty.bin").description, "an empty file");

  ErrorCode code{};
  EXPECT_NE(error_of([&] { probe_model_file(dir / "absent.bin"); }, &code).find("absent.bin"), std::string::npos);
  EXPECT_EQ(code, ErrorCode::kIo);
}

TEST(FamilyOf, NamesTheFamilyThatReadsAFileFromItsHeader) {
  TempDir dir("family-of");
  whisper::write_random_model(whisper::testing::pipeline_spec(1), dir / "model.bin");
  write_gguf_with_architecture(dir / "qwen.gguf", "qwen3vl");
  write_gguf_with_architecture(dir / "llama.gguf", "llama");
  EXPECT_EQ(family_of(dir / "model.bin"), "whisper");
  EXPECT_EQ(family_of(dir / "qwen.gguf"), "qwen3asr");
  EXPECT_EQ(family_of(dir / "llama.gguf"), "");  // no family reads it
}

TEST(EngineLoad, NamesWhatAFileIsWhenNoFamilyReadsIt) {
  TempDir dir("unreadable");
  write_gguf_with_architecture(dir / "llama.gguf", "llama");
  ModelSpec spec;
  spec.path = dir / "llama.gguf";
  ErrorCode code{};
  const std::string message = error_of([&] { load(spec); }, &code);
  EXPECT_EQ(code, ErrorCode::kUnsupported);
  EXPECT_NE(message.find("llama.gguf is a GGUF file of architecture 'llama'"), std::string::npos) << message;
  EXPECT_NE(message.find("families: whisper"), std::string::npos) << message;

  write_text(dir / "page.bin", "<html>not found</html>");
  spec.path = dir / "page.bin";
  EXPECT_NE(error_of([&] { load(spec); }).find("an HTML page"), std::string::npos);
}

TEST(EngineLoad, WhisperAndQwen3AsrRefuseALookaheadNamingTheFamilyThatTakesIt) {
  TempDir dir("lookahead");
  whisper::write_random_model(whisper::testing::pipeline_spec(1), dir / "model.bin");
  write_gguf_with_architecture(dir / "qwen.gguf", "qwen3vl");
  for (const auto& [file, family] : {std::pair{"model.bin", "a Whisper model (family whisper)"},
                                     std::pair{"qwen.gguf", "a Qwen3-ASR model (family qwen3asr)"}}) {
    ModelSpec spec;
    spec.path = dir / file;
    spec.options<TransducerOptions>().lookahead_ms = 560;
    ErrorCode code{};
    const std::string message = error_of([&] { load(spec); }, &code);
    EXPECT_EQ(code, ErrorCode::kInvalidArgument) << message;
    EXPECT_NE(message.find("--lookahead-ms 560 applies to cache-aware streaming transducers"), std::string::npos)
        << message;
    EXPECT_NE(message.find(family), std::string::npos) << message;
  }
  // Without the option the Whisper file loads as before.
  ModelSpec spec;
  spec.path = dir / "model.bin";
  EXPECT_EQ(load(spec)->capabilities().family, "whisper");
}

TEST(EngineLoad, OnlyWhisperTakesTheEncoderOverTheAudioPresent) {
  TempDir dir("encoder-input");
  whisper::write_random_model(whisper::testing::pipeline_spec(1), dir / "model.bin");
  write_gguf_with_architecture(dir / "qwen.gguf", "qwen3vl");
  ModelSpec spec;
  spec.path = dir / "qwen.gguf";
  spec.options<WhisperOptions>().encoder_input = whisper::EncoderInput::kAudioOnly;
  ErrorCode code{};
  const std::string message = error_of([&] { load(spec); }, &code);
  EXPECT_EQ(code, ErrorCode::kInvalidArgument) << message;
  EXPECT_NE(message.find("--encoder-input audio applies to Whisper models only"), std::string::npos) << message;
  EXPECT_NE(message.find("a Qwen3-ASR model (family qwen3asr)"), std::string::npos) << message;
  spec.path = dir / "model.bin";
  EXPECT_EQ(load(spec)->capabilities().family, "whisper");
}

TEST(EngineLoad, AFamilyRegisteredByATestLoadsFromItsArchitecture) {
  register_ticks_family();
  TempDir dir("ticks");
  write_gguf_with_architecture(dir / "ticks.gguf", kTicksArchitecture);
  ModelSpec spec;
  spec.path = dir / "ticks.gguf";
  const std::shared_ptr<const Engine> engine = load(spec);
  EXPECT_EQ(engine->capabilities().family, "ticks");
  EXPECT_DOUBLE_EQ(engine->capabilities().frames_per_second, 12.5);
  const auto names = family_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "whisper"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "ticks"), names.end());

  StreamRequest request;
  int passes = 0;
  request.on_pass = [&](ModelPass, std::chrono::nanoseconds) { ++passes; };
  auto stream = engine->open_stream(request);
  stream->insert_audio(std::vector<float>(16000, 0.1f), 1.0);
  const ProcessResult r = stream->process();
  ASSERT_EQ(r.committed.size(), 2u);
  EXPECT_EQ(r.committed[1].text, " tick2");
  EXPECT_EQ(passes, 1);

  request.policy = "alignatt";
  EXPECT_EQ(error_of([&] { engine->open_stream(request); }), "unknown --policy 'alignatt' (use native)");
  request.policy = "";
  request.language = "fr";
  EXPECT_EQ(error_of([&] { engine->open_stream(request); }), "unknown language code 'fr'");
  // A client's language reaches this message: a NUL cut it where it was read through what().
  request.language = std::string("f\0r\n", 4);
  EXPECT_EQ(error_of([&] { engine->open_stream(request); }), "unknown language code 'f\\x00r\\x0A'");
}

TEST(WhisperEngine, CapabilitiesLanguagesAndPoliciesOfAnEnglishModel) {
  ModelSpec spec;
  spec.runtime.threads = 1;
  const auto engine = load_random_engine(whisper::testing::pipeline_spec(3), "whisper-engine", spec);
  const Capabilities& c = engine->capabilities();
  EXPECT_EQ(c.family, "whisper");
  EXPECT_FALSE(c.multilingual);
  EXPECT_EQ(c.languages, std::vector<std::string>{"en"});
  EXPECT_EQ(c.policies, (std::vector<std::string>{"alignatt", "localagreement"}));
  EXPECT_DOUBLE_EQ(c.frames_per_second, 50);
  EXPECT_EQ(engine->language_problem("auto"), "");
  EXPECT_EQ(engine->language_problem("en"), "");
  EXPECT_EQ(engine->language_problem("de"), "this model is English-only: use language=en or auto");
  EXPECT_EQ(engine->resolve_policy(""), "alignatt");
  EXPECT_EQ(error_of([&] { engine->resolve_policy("rolling"); }),
            "unknown --policy 'rolling' (use alignatt or localagreement)");

  StreamRequest request;
  request.language = "de";
  EXPECT_NE(error_of([&] { engine->open_stream(request); }).find("English-only"), std::string::npos);
  for (const char* policy : {"alignatt", "localagreement"}) {
    request.language = "en";
    request.policy = policy;
    EXPECT_EQ(engine->open_stream(request)->language(), "en") << policy;
  }
}

// A stream's committed words (text and times) over a few seconds of noise, fed in
// 1 s pieces with a pass after each, then finished.
std::vector<std::string> stream_words(const Engine& engine, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  StreamRequest request;
  request.language = "en";
  std::unique_ptr<OnlineProcessor> stream = engine.open_stream(request);
  std::vector<std::string> words;
  auto keep = [&](const ProcessResult& r) {
    for (const Word& w : r.committed)
      words.push_back(w.text + "@" + std::to_string(w.start) + "-" + std::to_string(w.end));
  };
  std::vector<float> second(16000);
  for (int s = 0; s < 3; ++s) {
    for (float& x : second) x = noise(rng);
    stream->insert_audio(second, s + 1.0);
    keep(stream->process());
  }
  keep(stream->finish());
  return words;
}

TEST(WhisperEngine, BatchedDecodeStreamsCommitWhatUnbatchedOnesDoAndBadSizesAreRefused) {
  const whisper::RandomModelSpec model = whisper::testing::pipeline_spec(3);
  ModelSpec spec;
  spec.runtime.threads = 1;
  for (int bad : {1, -2, 65}) {
    spec.runtime.batch_streams = bad;
    EXPECT_NE(
        error_of([&] { load_random_engine(model, "batch-bad", spec); }).find("--batch-decode must be 0 (off) or 2..64"),
        std::string::npos)
        << bad;
  }
  spec.runtime.batch_streams = 0;
  const auto alone = load_random_engine(model, "batch-off", spec);
  spec.runtime.batch_streams = 4;
  const auto batched = load_random_engine(model, "batch-on", spec);
  EXPECT_EQ(alone->capabilities().batch_streams, 0);
  EXPECT_EQ(batched->capabilities().batch_streams, 4);
  constexpr int kStreams = 3;
  std::vector<std::vector<std::string>> expected(kStreams), got(kStreams);
  for (int i = 0; i < kStreams; ++i) expected[i] = stream_words(*alone, 10 + i);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) threads.emplace_back([&, i] { got[i] = stream_words(*batched, 10 + i); });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) EXPECT_EQ(got[i], expected[i]) << "stream " << i;
  EXPECT_NE(expected[0], expected[1]);  // the streams differ, so a mixed-up result would show
}

}  // namespace
}  // namespace earshot::engine::testing

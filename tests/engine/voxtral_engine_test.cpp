// The Voxtral Realtime family through the engine boundary, on a small random
// file from its generator: engine::load picks it by its architecture, its one
// policy (native) commits append-only words timed by their slots, the same words
// however the audio arrives, and --delay-ms is checked against the delays the
// model was trained with and refused by the other families, and with
// --batch-decode the streams' steps share graphs and give the lone words.
#include "engine/voxtral/voxtral_engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <thread>

#include "audio/wav.h"
#include "common/error.h"
#include "engine/families.h"
#include "engine/voxtral/options.h"
#include "engine/voxtral/registration.h"
#include "engine_test_util.h"
#include "model/voxtral/model.h"
#include "model/voxtral/random_model.h"

namespace earshot::engine {
namespace {

namespace fs = std::filesystem;

struct VoxtralEngineTest : ::testing::Test {
  static inline fs::path file;
  static void SetUpTestSuite() {
    file = fs::temp_directory_path() / ("earshot-voxtral-engine-" + std::to_string(::getpid()) + ".gguf");
    voxtral::RandomModelOptions o;
    o.seed = 5;
    o.pad_scale = 0.5f;  // text tokens at many slots
    voxtral::write_random_model(file, o);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove(file, ec);
  }
  static ModelSpec spec(int delay_ms = 0) {
    ModelSpec s;
    s.path = file;
    s.runtime.threads = 1;
    s.options<VoxtralOptions>().delay_ms = delay_ms;
    return s;
  }
};

std::vector<float> speech() {
  std::vector<float> pcm = audio::load_wav_file(fs::path(EARSHOT_SHARED_DIR) / "data" / "jfk.wav");
  pcm.resize(5 * 16000);
  return pcm;
}

using testing::text_of;
std::vector<Word> stream(const Engine& engine, const std::vector<float>& pcm, size_t chunk) {
  return testing::stream_words(engine, pcm, chunk);
}

TEST_F(VoxtralEngineTest, LoadsByItsArchitectureAndStreamsNativeWords) {
  EXPECT_EQ(family_of(file), "voxtral");
  const std::shared_ptr<const Engine> engine = load(spec());
  const Capabilities& c = engine->capabilities();
  EXPECT_EQ(c.family, "voxtral");
  EXPECT_EQ(c.policies, std::vector<std::string>{"native"});
  EXPECT_DOUBLE_EQ(c.frames_per_second, 12.5);  // one slot per 80 ms
  EXPECT_TRUE(c.multilingual);
  EXPECT_EQ(dynamic_cast<const VoxtralEngine&>(*engine).delay_slots(), 6);  // the file's default, 480 ms

  const std::vector<float> pcm = speech();
  const std::vector<Word> words = stream(*engine, pcm, 1600);
  ASSERT_GE(words.size(), 3u) << text_of(words);
  double previous_end = 0;
  for (const Word& w : words) {
    EXPECT_FALSE(w.text.empty());
    EXPECT_LE(w.start, w.end) << w.text;
    EXPECT_GE(w.start, previous_end - 1e-9) << w.text;  // append-only, in order
    EXPECT_LE(w.end, 5.0 + 1e-9) << w.text;             // never past the audio
    previous_end = w.end;
  }
  // The same words whatever the pieces (a push of 3217 samples is no whole slot).
  EXPECT_EQ(text_of(stream(*engine, pcm, 3217)), text_of(words));

  StreamRequest other;
  other.policy = "alignatt";
  try {
    engine->open_stream(other);
    ADD_FAILURE() << "alignatt was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unknown --policy 'alignatt' (use native)");
  }
}

TEST_F(VoxtralEngineTest, DelayMsIsOneTheModelWasTrainedWith) {
  EXPECT_EQ(dynamic_cast<const VoxtralEngine&>(*load(spec(400))).delay_slots(), 5);
  EXPECT_EQ(dynamic_cast<const VoxtralEngine&>(*load(spec(2400))).delay_slots(), 30);
  for (int ms : {440, 1600}) {
    try {
      load(spec(ms));
      ADD_FAILURE() << ms << " ms was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("--delay-ms " + std::to_string(ms)), std::string::npos) << e.what();
    }
  }
  // Another family's file refuses the option rather than ignore it.
  const Family f = voxtral_family();
  ModelSpec whisper = spec(400);
  whisper.path = "ggml-tiny.en.bin";
  EXPECT_NE(f.foreign_request(whisper, "a Whisper model (family whisper)").find("--delay-ms 400 applies to Voxtral"),
            std::string::npos);
  EXPECT_EQ(f.foreign_request(spec(0), "a Whisper model (family whisper)"), "");
}

// --batch-decode N: the streams' decoder steps run up to N in one graph, and
// each stream's words are its lone ones (the graph's identity is tested in
// tests/model/voxtral); sizes outside 2..64 are refused at load.
TEST_F(VoxtralEngineTest, BatchDecodeStreamsGetTheirLoneWords) {
  const std::shared_ptr<const Engine> lone = load(spec());
  EXPECT_EQ(lone->capabilities().batch_streams, 0);
  // The decoder on earshot's few-row op, unless --cpu-kernels ggml asks for ggml's kernels.
  EXPECT_TRUE(dynamic_cast<const VoxtralEngine&>(*lone).rows_decoder());
  ModelSpec on_ggml = spec();
  on_ggml.runtime.cpu_kernels = runtime::CpuKernels::kGgml;
  EXPECT_FALSE(dynamic_cast<const VoxtralEngine&>(*load(on_ggml)).rows_decoder());
  EXPECT_FALSE(lone->batch_counts());
  for (int bad : {1, -1, 65}) {
    ModelSpec s = spec();
    s.runtime.batch_streams = bad;
    try {
      load(s);
      ADD_FAILURE() << "--batch-decode " << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--batch-decode must be 0 (off) or 2..64"), std::string::npos) << e.what();
    }
  }
  ModelSpec s = spec();
  s.runtime.batch_streams = 4;
  const std::shared_ptr<const Engine> batched = load(s);
  EXPECT_EQ(batched->capabilities().batch_streams, 4);
  std::vector<float> pcm = speech();
  std::vector<float> quiet = pcm;
  for (float& v : quiet) v *= 0.3f;
  const std::vector<std::vector<float>> inputs = {pcm, quiet, std::vector<float>(pcm.begin() + 8000, pcm.end())};
  std::vector<std::string> want, got(inputs.size());
  for (const auto& in : inputs) want.push_back(text_of(stream(*lone, in, 1600)));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inputs.size(); ++i)
    threads.emplace_back([&, i] { got[i] = text_of(stream(*batched, inputs[i], 1600)); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got, want);
  const std::optional<BatchCounts> counts = batched->batch_counts();
  ASSERT_TRUE(counts);
  EXPECT_GT(counts->steps, 0);
  EXPECT_GE(counts->steps, counts->graphs);
  EXPECT_LE(counts->max_batch, 4);
}

// Keyterms are boosted as the transducers boost them (policy/transducer/phrase_boost.h),
// while each slot's token is chosen: a word the model does not say comes out with a
// bonus far above any gap, its two words whole though pads and word marks come
// between their pieces; without keyterms the words are exactly the model's own.
TEST_F(VoxtralEngineTest, KeytermsAreBoostedPhrases) {
  ModelSpec boosted_spec = spec();
  boosted_spec.policies.keyterm_bonus = 40;
  const std::shared_ptr<const Engine> engine = load(boosted_spec);
  const std::vector<float> pcm = speech();
  const std::string plain = text_of(stream(*engine, pcm, 1600));
  ASSERT_FALSE(plain.empty());
  // Two word-start pieces the plain words do not hold: a phrase of two words.
  const auto model = voxtral::Model::load(file);
  const TokenPieces& pieces = model->vocab();
  std::vector<std::string> absent;
  for (int t = 0; t < pieces.size() && absent.size() < 2; ++t) {
    if (!pieces.starts_word(t)) continue;
    const std::string word = pieces.text(t, true);
    if (word.size() >= 3 && plain.find(word) == std::string::npos &&
        std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isalpha(c); }))
      absent.push_back(word);
  }
  ASSERT_EQ(absent.size(), 2u);
  const std::string phrase = absent[0] + " " + absent[1];
  StreamRequest request;
  request.keyterms.add(phrase);
  const std::string boosted = text_of(testing::stream_words(*engine, pcm, 1600, request));
  EXPECT_NE(boosted.find(phrase), std::string::npos) << boosted;
  EXPECT_EQ(text_of(testing::stream_words(*engine, pcm, 1600, StreamRequest{})), plain);
  // (tekken is byte-level: every text has a spelling, so no phrase is left out.)
}

// A stream's own delay_ms (what the protocols' delay_ms asks) is the model loaded
// with that --delay-ms, for that stream only; the other families refuse any.
TEST_F(VoxtralEngineTest, AStreamsDelayIsTheModelLoadedWithIt) {
  const std::shared_ptr<const Engine> engine = load(spec());
  EXPECT_TRUE(engine->capabilities().stream_delay);
  EXPECT_EQ(engine->delay_problem(0), "");
  EXPECT_EQ(engine->delay_problem(160), "");
  EXPECT_NE(engine->delay_problem(440).find("440 is not a delay Voxtral Realtime was trained with"), std::string::npos);
  const std::vector<float> pcm = speech();
  StreamRequest request;
  request.delay_ms = 160;
  const std::vector<Word> words = testing::stream_words(*engine, pcm, 1600, request);
  const std::vector<Word> loaded_with = stream(*load(spec(160)), pcm, 1600);
  EXPECT_EQ(text_of(words), text_of(loaded_with));
  ASSERT_EQ(words.size(), loaded_with.size());
  for (size_t i = 0; i < words.size(); ++i) {
    EXPECT_DOUBLE_EQ(words[i].start, loaded_with[i].start) << i;
    EXPECT_DOUBLE_EQ(words[i].end, loaded_with[i].end) << i;
  }
  EXPECT_NE(text_of(stream(*engine, pcm, 1600)), text_of(words)) << "480 ms is another model input than 160 ms";
  request.delay_ms = 1600;
  try {
    engine->open_stream(request);
    ADD_FAILURE() << "1600 ms was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("delay_ms 1600 is not a delay"), std::string::npos) << e.what();
  }

  struct OtherFamily : Engine {
    OtherFamily() {
      c.family = "whisper";
      c.policies = {"alignatt"};
    }
    Capabilities c;
    const Capabilities& capabilities() const override { return c; }
    std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest&) const override { return nullptr; }
  } other;
  EXPECT_FALSE(other.capabilities().stream_delay);
  EXPECT_EQ(other.delay_problem(0), "");
  EXPECT_EQ(other.delay_problem(480),
            "480: this model (family whisper) has no per-stream delay; only Voxtral Realtime models take one");
}

}  // namespace
}  // namespace earshot::engine

// The Qwen3-ASR family through engine::load on a generated random-weight pair:
// the text GGUF is recognised, its mmproj found beside it or named, a missing
// one refused with the flag to pass, and both policies (alignatt, rolling)
// stream audio to committed words.
#include "engine/qwen3asr/qwen3asr_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/error.h"
#include "engine/catalogue.h"
#include "engine/families.h"
#include "engine/model_files.h"
#include "engine/model_options.h"
#include "model/qwen3asr/model_writer.h"
#include "model/registry.h"

namespace earshot::engine {
namespace {

namespace fs = std::filesystem;

struct Qwen3AsrEngineTest : ::testing::Test {
  static inline fs::path dir;
  static inline qwen3asr::WrittenPair pair;
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("earshot-qwen3asr-engine-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    pair = qwen3asr::write_random_pair(qwen3asr::PairDims::tiny(), EARSHOT_QWEN2_VOCAB, dir / "tiny", 3);
  }
  static void TearDownTestSuite() {
    engine.reset();
    fs::remove_all(dir);
  }
  static inline std::shared_ptr<const Engine> engine;
  // Loaded on first use and shared (a load costs ~1 s; CTest runs each test in a process of its own).
  static const Engine& shared() {
    if (!engine) engine = load(spec_of(pair.text));
    return *engine;
  }
  // One thread: with more, ggml's spinning thread barriers dominate the test's
  // time on a busy 2-core machine (perf: 58% in libgomp), for nothing it checks.
  static ModelSpec spec_of(const fs::path& path) {
    ModelSpec spec;
    spec.path = path;
    spec.runtime.threads = 1;
    return spec;
  }
  static std::string stream(const Engine& engine, const std::string& policy, double seconds) {
    StreamRequest request;
    request.policy = policy;
    request.language = "en";
    auto p = engine.open_stream(request);
    std::string text;
    for (int i = 0; i < static_cast<int>(seconds * 2); ++i) {
      std::vector<float> pcm(8000);
      for (size_t k = 0; k < pcm.size(); ++k) pcm[k] = 0.2f * std::sin(0.01f * static_cast<float>(k * (i + 3)));
      p->insert_audio(pcm, (i + 1) * 0.5);
      for (const Word& w : p->process().committed) text += w.text;
    }
    for (const Word& w : p->finish().committed) text += w.text;
    std::string all;
    for (const Word& w : p->hypothesis()) all += w.text;
    EXPECT_EQ(text, all);  // what was committed is the transcript: nothing twice, nothing lost
    return text;
  }
};

TEST_F(Qwen3AsrEngineTest, LoadsThePairWithTheMmprojFoundBesideIt) {
  const Engine& e = shared();
  EXPECT_EQ(e.capabilities().family, "qwen3asr");
  EXPECT_EQ(e.capabilities().policies, (std::vector<std::string>{"alignatt", "rolling"}));
  EXPECT_DOUBLE_EQ(e.capabilities().frames_per_second, 12.5);
  EXPECT_EQ(find_mmproj(pair.text, ""), pair.mmproj);
  EXPECT_EQ(e.language_problem("en"), "");
  EXPECT_NE(e.language_problem("xx"), "");
}

TEST_F(Qwen3AsrEngineTest, AMissingMmprojNamesTheFlag) {
  const fs::path alone = dir / "alone";
  fs::create_directories(alone);
  fs::copy_file(pair.text, alone / "model.gguf", fs::copy_options::overwrite_existing);
  ModelSpec spec = spec_of(alone / "model.gguf");
  try {
    load(spec);
    FAIL() << "loaded without an mmproj";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("--mmproj"), std::string::npos) << e.what();
  }
  spec.options<Qwen3AsrOptions>().mmproj = pair.mmproj;  // named explicitly it loads
  EXPECT_EQ(load(spec)->capabilities().family, "qwen3asr");
}

// `earshot quantize` of either file of the pair (the family's hook): the text
// model as libllama's quantizer writes it in place, the mmproj at q8_0; the
// quantised pair loads and streams; a quantised input is refused naming a tensor.
TEST_F(Qwen3AsrEngineTest, EarshotQuantizeWritesEitherFileOfThePair) {
  const fs::path q = dir / "quantised";
  fs::create_directories(q);
  const quantize::QuantizeReport text = quantize_model_file(pair.text, q / "tiny-q8.gguf", GGML_TYPE_Q8_0);
  EXPECT_EQ(text.family, "Qwen3-ASR (text model)");
  EXPECT_GT(text.n_quantized, 0);
  EXPECT_LT(text.bytes_out, text.bytes_in);
  const quantize::QuantizeReport mmproj = quantize_model_file(pair.mmproj, q / "tiny-q8-mmproj.gguf", GGML_TYPE_Q8_0);
  EXPECT_EQ(mmproj.family, "Qwen3-ASR mmproj (clip)");
  EXPECT_GT(mmproj.n_quantized, 0);
  // The same bytes as the in-place quantizer the generator tools use.
  fs::copy_file(pair.text, q / "in-place.gguf", fs::copy_options::overwrite_existing);
  qwen3asr::quantize_text_model(q / "in-place.gguf", GGML_TYPE_Q8_0);
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(bytes(q / "in-place.gguf") == bytes(q / "tiny-q8.gguf"));
  EXPECT_EQ(summarize_model_file(q / "tiny-q8.gguf").quantization.substr(0, 4), "q8_0");
  const std::shared_ptr<const Engine> quantised = load(spec_of(q / "tiny-q8.gguf"));  // its mmproj found beside it
  EXPECT_EQ(find_mmproj(q / "tiny-q8.gguf", ""), q / "tiny-q8-mmproj.gguf");
  EXPECT_FALSE(stream(*quantised, "alignatt", 3).empty());

  try {
    quantize_model_file(q / "tiny-q8.gguf", q / "again.gguf", GGML_TYPE_Q4_0);
    FAIL() << "requantised";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("is already quantised (tensor "), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_model_file(pair.mmproj, q / "m4.gguf", GGML_TYPE_Q4_0), Error);  // the mmproj: q8_0 only
  EXPECT_FALSE(fs::exists(q / "again.gguf.part"));
  EXPECT_FALSE(fs::exists(q / "m4.gguf.part"));
}

// `--model qwen3-asr-0.6b`: the registry name resolves to the cached text GGUF,
// and the engine's mmproj lookup finds the pulled mmproj beside it.
TEST_F(Qwen3AsrEngineTest, ARegistryNameResolvesBothFiles) {
  const fs::path cache = dir / "cache";
  fs::create_directories(cache);
  const models::ModelInfo m = *engine::find_model("qwen3-asr-0.6b");
  fs::create_symlink(pair.text, models::cached_model_path(m, cache));
  fs::create_symlink(pair.mmproj, models::cached_mmproj_path(m, cache));
  const fs::path text = engine::resolve_model("qwen3-asr-0.6b", cache);
  EXPECT_EQ(text, cache / "Qwen3-ASR-0.6B-Q8_0.gguf");
  EXPECT_EQ(find_mmproj(text, ""), cache / "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf");
}

TEST_F(Qwen3AsrEngineTest, BothPoliciesStreamToCommittedWords) {
  EXPECT_FALSE(stream(shared(), "alignatt", 2.0).empty());
  EXPECT_FALSE(stream(shared(), "rolling", 2.5).empty());
}

// on_pass (the bench's compute figures, the server's /metrics) sees every encode
// as an encoder pass and every prefill and step as a decoder pass, for both policies.
TEST_F(Qwen3AsrEngineTest, PassReportsCountEncoderAndDecoderPasses) {
  for (const std::string policy : {"alignatt", "rolling"}) {
    int encoder = 0, decoder = 0;
    StreamRequest request;
    request.policy = policy;
    request.language = "en";
    request.on_pass = [&](ModelPass pass, std::chrono::nanoseconds elapsed) {
      EXPECT_GT(elapsed.count(), 0);
      (pass == ModelPass::kEncoder ? encoder : decoder)++;
    };
    auto p = shared().open_stream(request);
    std::vector<float> pcm(40000);  // 2.5 s: past both policies' first pass
    for (size_t k = 0; k < pcm.size(); ++k) pcm[k] = 0.2f * std::sin(0.02f * static_cast<float>(k));
    p->insert_audio(pcm, 2.5);
    p->process();
    p->finish();
    EXPECT_GE(encoder, 1) << policy;
    EXPECT_GE(decoder, encoder) << policy;  // at least a prefill per encoded window
  }
}

// --batch-decode N: the streams decode on a shared context's slots and give the
// transcripts they give alone, for both policies (each ends its pass's steps,
// or the other streams' steps would wait for it); 1 or more than 16 is refused.
TEST_F(Qwen3AsrEngineTest, BatchDecodeStreamsTranscribeAsAlone) {
  ModelSpec spec = spec_of(pair.text);
  for (int bad : {1, kMaxQwen3BatchStreams + 1}) {
    spec.runtime.batch_streams = bad;
    try {
      load(spec);
      ADD_FAILURE() << "--batch-decode " << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--batch-decode must be 0 (off) or 2..16"), std::string::npos) << e.what();
    }
  }
  spec.runtime.batch_streams = 2;
  const std::shared_ptr<const Engine> batched = load(spec);
  EXPECT_EQ(batched->capabilities().batch_streams, 2);
  for (const std::string policy : {"alignatt", "rolling"}) {
    const std::string alone = stream(shared(), policy, 2.5);
    std::string a, b;
    std::thread ta([&] { a = stream(*batched, policy, 2.5); });
    std::thread tb([&] { b = stream(*batched, policy, 2.5); });
    ta.join();
    tb.join();
    EXPECT_EQ(a, alone) << policy;
    EXPECT_EQ(b, alone) << policy;
  }
}

TEST_F(Qwen3AsrEngineTest, AlignmentHeadsComeFromTheFileOrTheLastQuarter) {
  const fs::path heads = dir / "heads.json";
  { std::ofstream(heads) << R"({"alignment_heads_compact": [[3, 1], [2, 0], [3, 3]], "other": 1})"; }
  ModelSpec spec = spec_of(pair.text);
  spec.options<Qwen3AsrOptions>().alignment_heads = heads;
  EXPECT_NO_THROW(load(spec));
  std::ofstream(heads) << R"({"alignment_heads_compact": [[9, 0]]})";
  EXPECT_THROW(load(spec), Error);  // layer 9 of a 4-layer model
  std::ofstream(heads) << R"({"heads": []})";
  EXPECT_THROW(load(spec), Error);
}

// --qwen3-reuse: on by default, off reaches the model's options.
TEST(Qwen3AsrOptions, ReuseIsOnByDefault) {
  const auto read = [](std::vector<std::string> argv) {
    Args args("test", "");
    args.option("threads", "", "1");
    declare_model_options(args, CommandKind::kServe);
    args.parse(argv);
    return read_model_spec(args, CommandKind::kServe).options<Qwen3AsrOptions>().reuse;
  };
  EXPECT_TRUE(read({}));
  EXPECT_FALSE(read({"--qwen3-reuse", "off"}));
  EXPECT_THROW(read({"--qwen3-reuse", "maybe"}), Error);
}

// --qwen3-trim (AlignAtt over an audio LLM, declared by the policy with the model options): whole 8 s encoder
// windows by default, WhisperLiveKit's qwen3_simul's sliding trim on request.
TEST(Qwen3AsrOptions, TrimIsWindowBySlidingOnRequest) {
  const auto read = [](std::vector<std::string> argv) {
    Args args("test", "");
    args.option("threads", "", "1");
    declare_model_options(args, CommandKind::kTranscribe);
    args.parse(argv);
    return read_model_spec(args, CommandKind::kTranscribe).policies.prompted_alignatt.trim;
  };
  using Trim = policy::PromptedAlignAttConfig::Trim;
  EXPECT_EQ(read({}), Trim::kWindow);
  EXPECT_EQ(read({"--qwen3-trim", "sliding"}), Trim::kSliding);
  try {
    read({"--qwen3-trim", "fixed"});
    FAIL() << "accepted --qwen3-trim fixed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--qwen3-trim must be window or sliding"), std::string::npos);
  }
}

}  // namespace
}  // namespace earshot::engine

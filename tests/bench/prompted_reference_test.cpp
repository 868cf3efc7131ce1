// The reference workload for an audio-LLM decoder (src/bench/prompted_reference.h)
// on a random-weight Qwen3-ASR pair streamed through its AlignAtt: the reference
// transcript comes out exactly, no word is committed before its estimated end
// has been fed, a pass decodes no more steps than the words available, a first
// pass without a forced language names English, and the rolling mode is refused.
#include "bench/prompted_reference.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "audio/audio.h"
#include "bench/wer.h"
#include "engine/families.h"
#include "model/qwen3asr/model_writer.h"
#include "vad/vad.h"

namespace earshot::bench {
namespace {

namespace fs = std::filesystem;

struct PassLog {
  double buffer_end = 0;
  int calls = 0;  // the prefill and the steps
};

struct PromptedReferenceTest : ::testing::Test {
  static inline fs::path dir;
  static inline std::shared_ptr<const engine::Engine> engine;
  static inline std::vector<float> pcm;
  static inline std::string reference;
  static inline std::vector<TimedWord> words;
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("earshot-prompted-reference-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto pair = qwen3asr::write_random_pair(qwen3asr::PairDims::tiny(), EARSHOT_QWEN2_VOCAB, dir / "tiny", 5);
    engine::ModelSpec spec;
    spec.path = pair.text;
    spec.runtime.threads = 1;
    engine = engine::load(spec);
    // Five LibriVox clips back to back (past the 15 s buffer: its windows are trimmed).
    const std::string data = std::string(EARSHOT_SHARED_DIR) + "/data/librivox/";
    const auto vad_model = vad::VadModel::load(std::string(EARSHOT_SHARED_DIR) + "/models/silero-v6.2.0-ggml.bin");
    for (const char* clip : {"0870", "0880", "0890", "0920", "0930"}) {
      const std::string id = std::string("sense_and_sensibility_01_austen_64kb-") + clip;
      const std::vector<float> a = audio::load_file(data + id + ".wav");
      std::ifstream ref_file(data + id + ".txt");
      const std::string text{std::istreambuf_iterator<char>(ref_file), std::istreambuf_iterator<char>()};
      const double offset = static_cast<double>(pcm.size()) / 16000;
      for (TimedWord w :
           estimate_word_times(text, speech_segments(vad_model, a), static_cast<double>(a.size()) / 16000)) {
        w.start += offset;
        w.end += offset;
        words.push_back(w);
      }
      pcm.insert(pcm.end(), a.begin(), a.end());
      reference += text + " ";
    }
  }
  static void TearDownTestSuite() {
    engine.reset();
    fs::remove_all(dir);
  }
};

void stream_and_check(const std::string& language) {
  SCOPED_TRACE("language " + language);
  ASSERT_GT(PromptedReferenceTest::words.size(), 10u);
  const std::vector<float>& pcm = PromptedReferenceTest::pcm;
  const std::vector<TimedWord>& words = PromptedReferenceTest::words;
  const double seconds = static_cast<double>(pcm.size()) / 16000.0;
  std::vector<PassLog> passes;
  engine::StreamRequest request;
  request.language = language;
  request.on_pass = [&](ModelPass pass, std::chrono::nanoseconds) {
    if (pass == ModelPass::kEncoder) {
      passes.push_back({});
    } else if (!passes.empty()) {
      passes.back().calls++;
    }
  };
  ReferenceStream stream = open_reference_stream(*PromptedReferenceTest::engine, request, words);
  ASSERT_NE(stream.prompted, nullptr);
  stream.processor->warmup();
  passes.clear();

  std::string committed;
  std::vector<std::pair<double, std::string>> commits;  // audio fed, committed text after
  const size_t chunk = 8000;
  for (size_t at = 0;; at += chunk) {
    const bool last = at >= pcm.size();
    ProcessResult r;
    const size_t n_passes = passes.size();
    if (last) {
      r = stream.processor->finish();
    } else {
      const size_t n = std::min(chunk, pcm.size() - at);
      stream.processor->insert_audio(std::span<const float>(pcm).subspan(at, n), static_cast<double>(at + n) / 16000);
      r = stream.processor->process(false);
    }
    if (passes.size() > n_passes) passes.back().buffer_end = stream.prompted->buffer_end();
    for (const Word& w : r.committed) committed += w.text;
    commits.emplace_back(last ? seconds : static_cast<double>(at + std::min(chunk, pcm.size() - at)) / 16000,
                         committed);
    if (last) break;
  }
  EXPECT_EQ(stream.processor->language(), "en");

  const TextScore score = score_text(PromptedReferenceTest::reference, committed, NormalizerKind::kEnglish);
  EXPECT_EQ(score.words.errors(), 0) << committed;
  EXPECT_EQ(score.words.correct, score.words.reference);

  // No word is complete in the committed text before its estimated end was fed.
  std::string joined;
  std::vector<size_t> word_end_byte;
  for (const TimedWord& w : words) {
    joined += (joined.empty() ? "" : " ") + w.text;
    word_end_byte.push_back(joined.size());
  }
  size_t checked = 0;
  for (const auto& [fed, text] : commits) {
    ASSERT_EQ(joined.compare(0, text.size(), text), 0) << "committed text is not a prefix of the reference: " << text;
    for (size_t i = 0; i < words.size() && word_end_byte[i] <= text.size(); ++i) {
      EXPECT_LE(words[i].end, fed + 1e-9) << "word " << i << " '" << words[i].text << "'";
      ++checked;
    }
  }
  EXPECT_GT(checked, words.size());

  // Steps per pass: the reference tokens begun by then, the header's 3, the prefill and the end.
  const std::vector<double>& times = stream.prompted->token_times();
  ASSERT_EQ(times.size(), stream.prompted->tokens().size());
  int max_calls = 0;
  for (const PassLog& p : passes) {
    long begun = 0;
    for (double t : times) begun += t < p.buffer_end ? 1 : 0;
    EXPECT_LE(p.calls, begun + 5) << "pass ending at " << p.buffer_end;
    max_calls = std::max(max_calls, p.calls);
  }
  EXPECT_GT(seconds, 20.0);
  EXPECT_GE(passes.size(), 20u);
  EXPECT_GT(max_calls, 3);
}

TEST_F(PromptedReferenceTest, ReproducesTheReferenceCommittingNoWordBeforeItsTime) { stream_and_check("en"); }

TEST_F(PromptedReferenceTest, AFirstPassWithoutALanguageNamesEnglish) { stream_and_check("auto"); }

TEST_F(PromptedReferenceTest, TheRollingModeIsRefused) {
  engine::StreamRequest request;
  request.policy = "rolling";
  try {
    open_reference_stream(*engine, request, words);
    FAIL() << "opened a rolling reference stream";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("--policy alignatt only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace earshot::bench

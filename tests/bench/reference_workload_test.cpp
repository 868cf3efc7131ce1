// The reference workload (src/bench/reference_workload.h): word time estimates,
// and on a random-weight model streamed through each policy, that the reference
// transcript comes out exactly, no word is committed before its estimated end
// has been fed, and a pass decodes no more steps than the words available.
#include "bench/reference_workload.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "../engine/engine_test_util.h"
#include "audio/audio.h"
#include "bench/runner.h"
#include "bench/wer.h"
#include "engine/whisper/options.h"
#include "vad/vad.h"

namespace earshot::bench {
namespace {

TEST(ReferenceWorkload, WordTimesFollowCharacterLengthOverTheSpeechSpans) {
  // Two spans of 1 s, each ending 40 ms early (a flush at the live VAD's end finds
  // the span's last word whole): 1.92 s of speech. "aaa b cc" weighs 3+1+1+1+2 =
  // 8 characters, 0.24 s each.
  const auto words = estimate_word_times("aaa  b\tcc", {{1.0, 2.0}, {3.0, 4.0}}, 10.0);
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[0].text, "aaa");
  EXPECT_DOUBLE_EQ(words[0].start, 1.0);
  EXPECT_NEAR(words[0].end, 1.72, 1e-12);
  // " b" starts at 4/8 of the speech: the end of the first span, so the next one.
  EXPECT_DOUBLE_EQ(words[1].start, 3.0);
  EXPECT_NEAR(words[1].end, 3.24, 1e-12);
  EXPECT_NEAR(words[2].start, 3.48, 1e-12);
  EXPECT_NEAR(words[2].end, 3.96, 1e-12);
  // A span shorter than the slack's double keeps its first half.
  const auto short_span = estimate_word_times("a", {{1.0, 1.06}}, 10.0);
  ASSERT_EQ(short_span.size(), 1u);
  EXPECT_NEAR(short_span[0].end, 1.03, 1e-12);
}

TEST(ReferenceWorkload, WordTimesWithoutSpeechCoverTheAudioAndEndBeforeItsLastFrames) {
  const auto words = estimate_word_times("one two", {}, 2.12);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_DOUBLE_EQ(words[0].start, 0.0);
  EXPECT_DOUBLE_EQ(words[1].end, 2.0);  // 0.12 s before the end of the audio
  EXPECT_LT(words[0].end, words[1].start);
  EXPECT_TRUE(estimate_word_times("  ", {{0, 1}}, 1).empty());
}

struct Case {
  std::string policy;
  whisper::EncoderInput input;
};

class ReferenceStreamTest : public ::testing::TestWithParam<Case> {};

// Passes as the decoder saw them: where the audio ended, and decoder calls.
struct PassLog {
  double buffer_end = 0;
  int calls = 0;
};

TEST_P(ReferenceStreamTest, ReproducesTheReferenceCommittingNoWordBeforeItsTime) {
  const std::string dir = std::string(EARSHOT_SHARED_DIR) + "/data/librivox/";
  const std::string id = "sense_and_sensibility_01_austen_64kb-0870";
  const std::vector<float> pcm = audio::load_file(dir + id + ".wav");
  std::ifstream ref_file(dir + id + ".txt");
  std::string reference((std::istreambuf_iterator<char>(ref_file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(reference.empty());
  const double seconds = static_cast<double>(pcm.size()) / 16000.0;
  const auto vad_model = vad::VadModel::load(std::string(EARSHOT_SHARED_DIR) + "/models/silero-v6.2.0-ggml.bin");
  const std::vector<TimedWord> words = estimate_word_times(reference, speech_segments(vad_model, pcm), seconds);
  ASSERT_GT(words.size(), 10u);
  ASSERT_GT(words.front().start, 0.0);  // the VAD placed speech after the clip's leading silence

  engine::ModelSpec spec;
  spec.runtime.threads = 1;
  spec.options<engine::WhisperOptions>().encoder_input = GetParam().input;
  const auto engine =
      engine::testing::load_random_engine(whisper::testing::pipeline_spec(/*seed=*/11), "bench-reference", spec);
  std::vector<PassLog> passes;
  engine::StreamRequest request;
  request.policy = GetParam().policy;
  request.language = "en";
  request.on_warning = [](const std::string&) {};
  request.on_pass = [&](ModelPass pass, std::chrono::nanoseconds) {
    if (pass == ModelPass::kEncoder) {
      passes.push_back({});
    } else if (!passes.empty()) {
      passes.back().calls++;
    }
  };
  ReferenceStream stream = open_reference_stream(*engine, request, words);
  ASSERT_NE(stream.decoder, nullptr);
  stream.processor->warmup();
  passes.clear();

  // Feed 0.5 s chunks; after each, record what is committed against the audio fed.
  std::string committed;
  std::vector<std::pair<double, std::string>> commits;  // audio fed, committed text after
  std::vector<double> pass_end;
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
    if (passes.size() > n_passes) passes.back().buffer_end = stream.decoder->buffer_end();
    for (const Word& w : r.committed) committed += w.text;
    commits.emplace_back(last ? seconds : static_cast<double>(at + std::min(chunk, pcm.size() - at)) / 16000,
                         committed);
    if (last) break;
  }

  // Exact up to normalisation (WER 0), and every word there.
  const TextScore score = score_text(reference, committed, NormalizerKind::kEnglish);
  EXPECT_EQ(score.words.errors(), 0) << committed;
  EXPECT_GT(score.words.reference, 10);
  EXPECT_EQ(score.words.correct, score.words.reference);

  // No word is complete in the committed text before its estimated end was fed.
  std::string joined;
  std::vector<size_t> word_end_byte;
  for (const TimedWord& w : words) {
    joined += " " + w.text;
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

  // Decoder calls per pass are bounded by the reference tokens begun by then (+1: the step that ends the pass).
  ASSERT_FALSE(passes.empty());
  const std::vector<int32_t>& tokens = stream.decoder->tokens();
  const std::vector<double>& times = stream.decoder->token_times();
  ASSERT_EQ(tokens.size(), times.size());
  int max_calls = 0;
  for (const PassLog& p : passes) {
    long begun = 0;
    for (double t : times) begun += t < p.buffer_end ? 1 : 0;
    EXPECT_LE(p.calls, begun + 1) << "pass ending at " << p.buffer_end;
    max_calls = std::max(max_calls, p.calls);
  }
  EXPECT_GT(max_calls, 1);  // passes did decode
}

INSTANTIATE_TEST_SUITE_P(Policies, ReferenceStreamTest,
                         ::testing::Values(Case{"alignatt", whisper::EncoderInput::kAudioOnly},
                                           Case{"alignatt", whisper::EncoderInput::kFullWindow},
                                           Case{"localagreement", whisper::EncoderInput::kAudioOnly}),
                         [](const auto& info) {
                           return info.param.policy +
                                  (info.param.input == whisper::EncoderInput::kAudioOnly ? "_audio" : "_full");
                         });

}  // namespace
}  // namespace earshot::bench

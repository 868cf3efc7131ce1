// whisper::Session behaviour on small random-weight models: KV-cache rollback
// and reorder, batched sequences, alignment-head attention, encoder input
// modes, language detection, thread safety of a shared Model, limits.
#include "model/whisper/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/pass_threads.h"
#include "decode_compare.h"
#include "model_test_util.h"

namespace earshot::whisper {
namespace {

using testing::small_spec;
using testing::TempDir;

std::vector<float> test_audio(size_t n, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  std::vector<float> pcm(n);
  for (size_t i = 0; i < n; ++i) pcm[i] = 0.3f * std::sin(0.05f * static_cast<float>(i)) + noise(rng);
  return pcm;
}

DecodeResult decode(Session& s, std::vector<std::vector<int32_t>> tokens, std::vector<int> positions = {}) {
  DecodeRequest r;
  r.tokens = std::move(tokens);
  r.logits_positions = std::move(positions);
  return s.decode(r);
}

std::vector<float> logits_of(const DecodeResult& r, int sequence, int position = 0) {
  return std::vector<float>(r.logits_at(sequence, position), r.logits_at(sequence, position) + r.n_vocab);
}

using earshot::testing::max_abs_difference;

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("session");
    RandomModelSpec spec = small_spec("tiny.en");
    spec.hparams.n_audio_ctx = 100;  // 2 s window: room for the audio-only buckets
    write_random_model(spec, *dir_ / "en.bin");
    model_ = Model::load(*dir_ / "en.bin");
  }
  static void TearDownTestSuite() {
    model_.reset();
    delete dir_;
  }
  static SessionOptions options(int threads = 2) {
    SessionOptions o;
    o.n_threads = threads;
    return o;
  }
  int sot() const { return 50257; }  // English-only layout: eot 50256, sot 50257

  static TempDir* dir_;
  static std::shared_ptr<const Model> model_;
};
TempDir* SessionTest::dir_ = nullptr;
std::shared_ptr<const Model> SessionTest::model_;

TEST_F(SessionTest, DimensionsComeFromTheModel) {
  Session s(model_, options());
  EXPECT_EQ(s.n_text_ctx(), 16);
  EXPECT_EQ(s.max_samples(), 100 * 2 * 160);
  EXPECT_EQ(s.frames_per_second(), 50);
  EXPECT_EQ(s.tokenizer().special().sot, sot());
  EXPECT_EQ(s.encode(test_audio(8000)), 25);  // 0.5 s of content = 25 encoder frames
  EXPECT_EQ(s.n_audio_frames(), 100);         // full window
}

TEST_F(SessionTest, RollbackGivesTheLogitsOfDecodingThePrefixFresh) {
  Session s(model_, options());
  s.encode(test_audio(16000));
  decode(s, {{sot(), 100, 200}});
  decode(s, {{300, 400}});
  EXPECT_EQ(s.n_past(), 5);
  s.rollback(3);
  EXPECT_EQ(s.n_past(), 3);
  DecodeResult after_rollback = decode(s, {{500}});

  s.reset(1);
  decode(s, {{sot(), 100, 200}});
  DecodeResult fresh = decode(s, {{500}});
  EXPECT_EQ(logits_of(after_rollback, 0), logits_of(fresh, 0));
  EXPECT_EQ(after_rollback.attention, fresh.attention);
  EXPECT_THROW(s.rollback(5), Error);
}

// A step's allocation plan must be its own. ggml_gallocr_alloc_graph keeps the last
// plan whenever the node and leaf counts match and every tensor fits, so a plan made
// for a step without attention outputs (where the softmax's memory is free for later
// nodes) would be reused by an attention step after a rollback, and later nodes would
// overwrite the attention before it is read. The threaded batcher test saw this as
// an attention "difference" of 5.69 once in four runs, depending on which steps of a
// session had run alone.
TEST_F(SessionTest, AStepAfterARollbackGetsItsOwnAttentionWhateverTheStepBeforeAskedFor) {
  auto run = [&](bool attention_before) {
    Session s(model_, options(1));
    s.encode(test_audio(16000));
    decode(s, {{sot(), 100, 200}});  // a multi-token step: the plan is made afresh
    DecodeRequest r;
    r.tokens = {{300}};
    r.want_attention = attention_before;
    s.decode(r);  // a one-token step planned with or without attention outputs
    s.rollback(3);
    r.tokens = {{400}};
    r.want_attention = true;
    return s.decode(r);  // the same counts, smaller or equal tensors
  };
  const DecodeResult after_plain = run(false);
  const DecodeResult after_attention = run(true);
  ASSERT_FALSE(after_attention.attention.empty());
  EXPECT_EQ(after_plain.attention, after_attention.attention);
  EXPECT_EQ(after_plain.logits, after_attention.logits);
  for (float a : after_plain.attention) ASSERT_TRUE(a >= 0.0f && a <= 1.0f) << a;
}

TEST_F(SessionTest, VocabularyLimitGivesThePrefixOfTheWholeLogits) {
  Session s(model_, options());
  s.encode(test_audio(16000));
  decode(s, {{sot(), 100}});
  const DecodeResult whole = decode(s, {{200}});
  s.rollback(2);
  DecodeRequest limited_request;
  limited_request.tokens = {{200}};
  limited_request.vocabulary_limit = 50363;
  const DecodeResult limited = s.decode(limited_request);
  ASSERT_EQ(limited.n_vocab, 50363);
  const std::vector<float> all = logits_of(whole, 0);
  EXPECT_EQ(logits_of(limited, 0), std::vector<float>(all.begin(), all.begin() + 50363));
  EXPECT_EQ(limited.attention, whole.attention);
  limited_request.vocabulary_limit = whole.n_vocab + 1;
  s.rollback(2);
  EXPECT_THROW(s.decode(limited_request), Error);
}

TEST_F(SessionTest, ReorderMakesSequencesContinueFromTheirSources) {
  Session s(model_, options());
  s.encode(test_audio(16000));
  s.reset(3);
  decode(s, {{sot(), 10}, {sot(), 20}, {sot(), 30}});
  const std::vector<int> source = {2, 0, 0};
  s.reorder(source);
  DecodeResult reordered = decode(s, {{1}, {2}, {3}});

  s.reset(3);
  decode(s, {{sot(), 30}, {sot(), 10}, {sot(), 10}});
  DecodeResult direct = decode(s, {{1}, {2}, {3}});
  for (int seq = 0; seq < 3; ++seq) EXPECT_EQ(logits_of(reordered, seq), logits_of(direct, seq)) << seq;
  const std::vector<int> bad = {0, 3, 1};
  EXPECT_THROW(s.reorder(bad), Error);
}

TEST_F(SessionTest, BatchOfTwoSequencesEqualsEachAlone) {
  Session s(model_, options());
  s.encode(test_audio(16000));
  s.reset(2);
  DecodeResult batch = decode(s, {{sot(), 11, 12}, {sot(), 21, 22}}, {0, 2});
  DecodeResult batch_next = decode(s, {{13}, {23}});
  ASSERT_EQ(batch.n_positions, 2);
  ASSERT_EQ(batch.n_heads, s.n_alignment_heads());

  const std::vector<std::vector<int32_t>> prompts = {{sot(), 11, 12}, {sot(), 21, 22}};
  const std::vector<int32_t> next = {13, 23};
  for (int seq = 0; seq < 2; ++seq) {
    s.reset(1);
    DecodeResult alone = decode(s, {prompts[seq]}, {0, 2});
    DecodeResult alone_next = decode(s, {{next[seq]}});
    // Matrix products over different batch widths may sum in a different order
    // (1e-7 apart), which can flip the f16 rounding of a cached K/V element: logits
    // then move by up to ~5e-3 (measured) on this model, whose logits span +-13.
    EXPECT_LT(max_abs_difference(logits_of(batch, seq, 0), logits_of(alone, 0, 0)), 2e-2f);
    EXPECT_LT(max_abs_difference(logits_of(batch, seq, 1), logits_of(alone, 0, 1)), 2e-2f);
    EXPECT_LT(max_abs_difference(logits_of(batch_next, seq), logits_of(alone_next, 0)), 2e-2f);
    for (int h = 0; h < batch_next.n_heads; ++h) {
      for (int f = 0; f < batch_next.n_frames; ++f) {
        EXPECT_NEAR(batch_next.attention_at(seq, h, 0)[f], alone_next.attention_at(0, h, 0)[f], 1e-3f);
      }
    }
  }
}

TEST_F(SessionTest, AlignmentHeadAttentionIsASoftmaxOverFramesForEveryToken) {
  Session s(model_, options());
  s.encode(test_audio(16000));
  DecodeResult r = decode(s, {{sot(), 5, 6, 7}});
  ASSERT_EQ(r.n_heads, static_cast<int>(model_->alignment_heads().size()));
  ASSERT_GT(r.n_heads, 0);
  ASSERT_EQ(r.n_tokens, 4);
  ASSERT_EQ(r.n_frames, 100);
  ASSERT_EQ(r.attention.size(), static_cast<size_t>(r.n_heads) * 4 * 100);
  for (int h = 0; h < r.n_heads; ++h) {
    for (int t = 0; t < 4; ++t) {
      const float* a = r.attention_at(0, h, t);
      EXPECT_NEAR(std::accumulate(a, a + r.n_frames, 0.0), 1.0, 1e-4) << h << "," << t;
      EXPECT_TRUE(std::all_of(a, a + r.n_frames, [](float x) { return x >= 0.0f; }));
    }
  }
  // Attention of a token does not depend on whether later tokens come in the same call.
  s.reset(1);
  decode(s, {{sot(), 5}});
  DecodeResult later = decode(s, {{6, 7}});
  for (int h = 0; h < r.n_heads; ++h) {
    for (int f = 0; f < 100; ++f) EXPECT_NEAR(later.attention_at(0, h, 0)[f], r.attention_at(0, h, 2)[f], 1e-5f);
  }
}

TEST_F(SessionTest, ChosenAlignmentHeadsComeOutInTheirOrderForEverySequence) {
  // The same file with three heads in a scrambled order, and with each head alone:
  // the graphs compute the same numbers, so every (sequence, head) block of the
  // three-head result equals the one-head result exactly.
  const std::vector<AlignmentHead> chosen = {{1, 1}, {0, 0}, {1, 0}};
  LoadOptions three;
  three.alignment_heads = chosen;
  auto run = [&](const LoadOptions& load) {
    Session s(Model::load(*dir_ / "en.bin", load), options());
    s.encode(test_audio(16000));
    s.reset(2);
    decode(s, {{sot(), 11, 12}, {sot(), 21, 22}});
    return decode(s, {{13}, {23}});
  };
  const DecodeResult all = run(three);
  ASSERT_EQ(all.n_heads, 3);
  ASSERT_EQ(all.attention.size(), static_cast<size_t>(2 * 3 * all.n_frames));
  for (size_t i = 0; i < chosen.size(); ++i) {
    LoadOptions one;
    one.alignment_heads = {chosen[i]};
    const DecodeResult alone = run(one);
    ASSERT_EQ(alone.n_heads, 1);
    for (int seq = 0; seq < 2; ++seq) {
      const float* a = all.attention_at(seq, static_cast<int>(i), 0);
      const float* b = alone.attention_at(seq, 0, 0);
      EXPECT_EQ(std::vector<float>(a, a + all.n_frames), std::vector<float>(b, b + alone.n_frames))
          << "head " << i << ", sequence " << seq;
    }
  }
  // Different heads attend differently (the check above would pass vacuously otherwise).
  EXPECT_NE(std::vector<float>(all.attention_at(0, 0, 0), all.attention_at(0, 0, 0) + all.n_frames),
            std::vector<float>(all.attention_at(0, 2, 0), all.attention_at(0, 2, 0) + all.n_frames));
  EXPECT_NE(std::vector<float>(all.attention_at(0, 0, 0), all.attention_at(0, 0, 0) + all.n_frames),
            std::vector<float>(all.attention_at(1, 0, 0), all.attention_at(1, 0, 0) + all.n_frames));
}

TEST_F(SessionTest, AudioOnlyInputCoveringTheWindowEqualsTheFullWindow) {
  SessionOptions short_options = options();
  short_options.encoder_input = EncoderInput::kAudioOnly;
  short_options.audio_bucket_frames = 50;
  Session full(model_, options()), part(model_, short_options);
  const std::vector<float> window = test_audio(static_cast<size_t>(full.max_samples()));
  EXPECT_EQ(full.encode(window), 100);
  EXPECT_EQ(part.encode(window), 100);
  EXPECT_EQ(part.n_audio_frames(), 100);
  EXPECT_EQ(logits_of(decode(full, {{sot(), 9}}), 0), logits_of(decode(part, {{sot(), 9}}), 0));
}

TEST_F(SessionTest, AudioOnlyInputKeepsAMarginOfPaddingAfterTheAudio) {
  SessionOptions o = options();
  o.encoder_input = EncoderInput::kAudioOnly;
  o.audio_bucket_frames = 50;
  o.audio_pad_frames = 20;
  Session s(model_, o);
  s.encode(test_audio(9600));  // 60 mel frames + 20 of padding -> a bucket of 100
  EXPECT_EQ(s.n_audio_frames(), 50);
  s.encode(test_audio(14400));  // 90 + 20 -> 150 (without the margin: 100)
  EXPECT_EQ(s.n_audio_frames(), 75);
  s.encode(test_audio(30400));  // 190 + 20: at most the whole window
  EXPECT_EQ(s.n_audio_frames(), 100);
  // The default margin: 32 encoder frames.
  EXPECT_EQ(SessionOptions{}.audio_pad_frames, 64);
  o.audio_pad_frames = -2;
  EXPECT_THROW(Session(model_, o), Error);
}

TEST_F(SessionTest, AudioOnlyInputEncodesTheAudioRoundedUpToTheBucket) {
  SessionOptions short_options = options();
  short_options.encoder_input = EncoderInput::kAudioOnly;
  short_options.audio_bucket_frames = 50;
  short_options.audio_pad_frames = 0;
  Session full(model_, options()), part(model_, short_options);
  const std::vector<float> audio = test_audio(9600);  // 0.6 s = 60 mel frames -> bucket of 100 = 50 encoder frames
  EXPECT_EQ(full.encode(audio), 30);
  EXPECT_EQ(part.encode(audio), 30);
  EXPECT_EQ(full.n_audio_frames(), 100);
  EXPECT_EQ(part.n_audio_frames(), 50);
  DecodeResult f = decode(full, {{sot(), 9}});
  DecodeResult p = decode(part, {{sot(), 9}});
  EXPECT_EQ(p.n_frames, 50);
  for (int h = 0; h < p.n_heads; ++h) {
    const float* a = p.attention_at(0, h, 1);
    EXPECT_NEAR(std::accumulate(a, a + 50, 0.0), 1.0, 1e-4);
  }
  // Expected difference: without the padding frames the attention is spread over
  // fewer keys, so the logits move (by O(1) on random weights); they stay finite.
  EXPECT_GT(max_abs_difference(logits_of(f, 0), logits_of(p, 0)), 1e-3f);
  EXPECT_TRUE(std::all_of(p.logits.begin(), p.logits.end(), [](float x) { return std::isfinite(x); }));
}

TEST_F(SessionTest, FlashAttentionEncoderMatchesTheExplicitSoftmaxClosely) {
  SessionOptions explicit_softmax = options();
  explicit_softmax.flash_attention = false;
  Session plain(model_, explicit_softmax), fused(model_, options());
  // Fused is the default, and the CPU has the op.
  EXPECT_TRUE(fused.fused_attention());
  EXPECT_FALSE(plain.fused_attention());
  const std::vector<float> audio = test_audio(16000);
  plain.encode(audio);
  fused.encode(audio);
  const std::vector<float> a = logits_of(decode(plain, {{sot(), 9}}), 0);
  const std::vector<float> b = logits_of(decode(fused, {{sot(), 9}}), 0);
  // Same maths, different rounding (f16 accumulation inside the fused kernel).
  EXPECT_LT(max_abs_difference(a, b), 5e-2f);
}

TEST_F(SessionTest, OpenBlasEncoderMatchesGgmlsClosely) {
  SessionOptions ggml_options = options(), blas_options = options();
  ggml_options.flash_attention = false;
  blas_options.cpu_kernels = runtime::CpuKernels::kOpenBlas;
  Session plain(model_, ggml_options), blas(model_, blas_options);
  EXPECT_FALSE(plain.openblas_encoder());  // ggml's kernels are the library's default
  ASSERT_TRUE(blas.openblas_encoder()) << runtime::openblas_status();
  for (int samples : {32000, 9600}) {  // the full window, and audio alone
    const std::vector<float> audio = test_audio(static_cast<size_t>(samples));
    plain.encode(audio);
    blas.encode(audio);
    const std::vector<float> a = logits_of(decode(plain, {{sot(), 9}}), 0);
    const std::vector<float> b = logits_of(decode(blas, {{sot(), 9}}), 0);
    // The same maths in f32 where ggml rounds activations to f16 before each product.
    EXPECT_LT(max_abs_difference(a, b), 5e-2f);
    EXPECT_GT(max_abs_difference(a, b), 0.0f);
    EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), std::max_element(b.begin(), b.end()) - b.begin());
  }
}

// `run` on two inputs, each alone, then both at once on two threads: each result
// is the same bit for bit, and the two differ.
void expect_threaded_runs_equal_lone_ones(const std::function<std::vector<float>(const std::vector<float>&)>& run,
                                          const std::vector<float>& a_audio, const std::vector<float>& b_audio) {
  const std::vector<float> a_alone = run(a_audio), b_alone = run(b_audio);
  std::vector<float> a_threaded, b_threaded;
  std::thread ta([&] { a_threaded = run(a_audio); });
  std::thread tb([&] { b_threaded = run(b_audio); });
  ta.join();
  tb.join();
  EXPECT_EQ(a_alone, a_threaded);
  EXPECT_EQ(b_alone, b_threaded);
  EXPECT_NE(a_alone, b_alone);
}

// OpenBLAS is called from every graph thread of every session at once (one thread a
// call): two sessions in two threads get what each gets alone, bit for bit.
TEST_F(SessionTest, OpenBlasEncodersInTwoThreadsEqualEachAlone) {
  SessionOptions o = options(2);
  o.cpu_kernels = runtime::CpuKernels::kOpenBlas;
  expect_threaded_runs_equal_lone_ones(
      [&](const std::vector<float>& audio) {
        Session s(model_, o);
        for (int pass = 0; pass < 3; ++pass) s.encode(audio);
        return logits_of(decode(s, {{sot(), 42}}), 0);
      },
      test_audio(32000, 1), test_audio(24000, 2));
}

TEST_F(SessionTest, TwoSessionsOnOneModelInTwoThreadsEqualEachAlone) {
  expect_threaded_runs_equal_lone_ones(
      [&](const std::vector<float>& audio) {
        Session s(model_, options(1));
        s.encode(audio);
        decode(s, {{sot(), 42}});
        return logits_of(decode(s, {{43}}), 0);
      },
      test_audio(16000, 1), test_audio(12000, 2));
}

// The scheduler decides a pass's threads per pass (common/pass_threads.h: a lone
// pass borrows the idle workers' cores): the values never depend on how many
// threads computed them, with ggml's kernels and with OpenBLAS's, in the encoder
// (the mel included) and the decoder.
TEST_F(SessionTest, APassGivesTheSameValuesOnAnyNumberOfThreads) {
  for (runtime::CpuKernels kernels : {runtime::CpuKernels::kGgml, runtime::CpuKernels::kOpenBlas}) {
    SessionOptions o = options(1);
    o.cpu_kernels = kernels;
    std::vector<std::vector<float>> by_threads;
    for (int threads : {1, 2, 3, 4}) {
      PassThreads lend(threads);
      Session s(model_, o);
      s.encode(test_audio(32000, 3));
      decode(s, {{sot(), 42}});
      by_threads.push_back(logits_of(decode(s, {{43}}), 0));
    }
    for (size_t i = 1; i < by_threads.size(); ++i)
      EXPECT_EQ(by_threads[0], by_threads[i]) << (i + 1) << " threads, " << runtime::to_string(kernels);
  }
}

TEST_F(SessionTest, DecodingPastTheTextContextThrows) {
  Session s(model_, options());
  EXPECT_THROW(decode(s, {{sot()}}), Error);  // before encode
  s.encode(test_audio(8000));
  std::vector<int32_t> tokens(16, 100);
  tokens[0] = sot();
  EXPECT_THROW(decode(s, {std::vector<int32_t>(17, 100)}), Error);
  decode(s, {tokens});
  EXPECT_EQ(s.n_past(), 16);
  try {
    decode(s, {{100}});
    FAIL() << "decode past n_text_ctx did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(s.n_past(), 16);
  EXPECT_THROW(decode(s, {{100}, {100}}), Error);  // two sequences in a one-sequence session
  s.rollback(15);
  EXPECT_NO_THROW(decode(s, {{100}}));
  EXPECT_THROW(decode(s, {{60000}}), Error);
  EXPECT_THROW(s.encode(test_audio(s.max_samples() + 1)), Error);
}

TEST(SessionModels, LanguageDetectionLeavesTheCacheAsItWas) {
  TempDir dir("session-ml");
  RandomModelSpec spec = small_spec("tiny");
  write_random_model(spec, dir / "ml.bin");
  auto model = Model::load(dir / "ml.bin");
  Session s(model, {});
  s.encode(test_audio(4000));
  const int sot = s.tokenizer().special().sot;
  decode(s, {{sot, 50259}});
  std::vector<float> probs = s.detect_language();
  ASSERT_EQ(probs.size(), 99u);
  EXPECT_NEAR(std::accumulate(probs.begin(), probs.end(), 0.0), 1.0, 1e-5);
  EXPECT_EQ(s.n_past(), 2);
  DecodeResult after = decode(s, {{500}});

  Session fresh(model, {});
  fresh.encode(test_audio(4000));
  DecodeResult sot_step = decode(fresh, {{sot}});
  EXPECT_EQ(probs, language_probabilities(logits_of(sot_step, 0), fresh.tokenizer()));
  fresh.rollback(0);
  decode(fresh, {{sot, 50259}});
  EXPECT_EQ(logits_of(after, 0), logits_of(decode(fresh, {{500}}), 0));
}

TEST(SessionModels, RunsAllF32AndQuantisedModels) {
  TempDir dir("session-types");
  std::vector<std::vector<float>> logits;
  for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
    write_random_model(small_spec("tiny.en", type), dir / "m.bin");
    auto model = Model::load(dir / "m.bin");
    ASSERT_EQ(model->weight_type(), type);
    Session s(model, {});
    s.encode(test_audio(4000));
    logits.push_back(logits_of(decode(s, {{50257, 300}}), 0));
  }
  // The same random weights stored at lower precision give nearby logits (measured
  // 2e-2 for f16 and 0.22 for q8_0, whose activations are also quantised, on logits of +-13).
  EXPECT_LT(max_abs_difference(logits[0], logits[1]), 0.1f);
  EXPECT_LT(max_abs_difference(logits[0], logits[2]), 0.6f);
  EXPECT_GT(max_abs_difference(logits[0], logits[2]), 0.0f);
}

TEST(SessionHelpers, NoSpeechProbabilityIsTheSoftmaxOfTheNoSpeechToken) {
  Tokenizer tok(std::vector<std::string>(50256, "x"), 51864);
  std::vector<float> logits(51864, 0.0f);
  logits[tok.special().no_speech] = std::log(51863.0f);  // e^x equals the sum of all others
  EXPECT_NEAR(no_speech_probability(logits, tok), 0.5f, 1e-5f);
}

}  // namespace
}  // namespace earshot::whisper

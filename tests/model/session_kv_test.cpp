// whisper::Session over its runtime::KvCache: a prompt shared by the beams
// (computed once, copied to every sequence) gives exactly what decoding it for
// every beam gives (a one-token prompt: to rounding with llamafile), and language
// detection leaves every sequence's cache exactly as it was. Random-weight models
// of each weight kind.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "decode_compare.h"
#include "model/whisper/session.h"
#include "model_test_util.h"

namespace earshot::whisper {
namespace {

using testing::noise_audio;
using testing::small_spec;
using testing::TempDir;

DecodeResult decode(Session& s, std::vector<std::vector<int32_t>> tokens, std::vector<int> positions = {}) {
  DecodeRequest r;
  r.tokens = std::move(tokens);
  r.logits_positions = std::move(positions);
  return s.decode(r);
}

using earshot::testing::Exactness;
void expect_same(const DecodeResult& a, const DecodeResult& b, const std::string& what,
                 Exactness exactness = Exactness::kBitForBit) {
  earshot::testing::expect_same_decode(a, b, what, exactness);
}

// A beam search's pass: the prompt appended to every beam, a reorder, steps with
// different tokens per beam and reorders between them, a rollback and one more step.
std::vector<DecodeResult> beam_pass(const std::shared_ptr<const Model>& model, bool share_prompt,
                                    const std::vector<int32_t>& prompt) {
  SessionOptions options;
  options.n_threads = 2;
  options.share_prompt = share_prompt;
  Session s(model, options);
  s.encode(noise_audio(4000, 5));
  s.reset(4);
  std::vector<DecodeResult> out;
  out.push_back(decode(s, std::vector<std::vector<int32_t>>(4, prompt), {0, static_cast<int>(prompt.size()) - 1}));
  const std::vector<int> first = {2, 0, 0, 1};
  s.reorder(first);
  out.push_back(decode(s, {{11}, {12}, {13}, {14}}));
  const std::vector<int> second = {3, 3, 1, 0};
  s.reorder(second);
  out.push_back(decode(s, {{21}, {22}, {23}, {24}}));
  s.rollback(static_cast<int>(prompt.size()) + 1);
  out.push_back(decode(s, {{31}, {32}, {33}, {34}}));
  return out;
}

class SharedPromptTest : public ::testing::TestWithParam<ggml_type> {};

TEST_P(SharedPromptTest, BeamsSharingThePromptEqualEveryBeamPrefillingIt) {
  TempDir dir("session-shared");
  write_random_model(small_spec("tiny.en", GetParam()), dir / "m.bin");
  auto model = Model::load(dir / "m.bin");
  const int sot = 50257;
  // One token (a vector-matrix product per beam) and several (matrix products).
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{sot}, std::vector<int32_t>{sot, 220, 1000, 50362}}) {
    const std::vector<DecodeResult> shared = beam_pass(model, true, prompt);
    const std::vector<DecodeResult> prefilled = beam_pass(model, false, prompt);
    ASSERT_EQ(shared.size(), prefilled.size());
    // A one-token prompt shared is a one-column product, prefilled a four-column one:
    // equal to rounding with llamafile (decode_compare.h). Longer prompts are
    // many-column products either way, so bit-identical in every build.
    const Exactness exactness = prompt.size() == 1 ? earshot::testing::across_batch_widths() : Exactness::kBitForBit;
    for (size_t i = 0; i < shared.size(); ++i) {
      expect_same(shared[i], prefilled[i], "prompt of " + std::to_string(prompt.size()) + ", step " + std::to_string(i),
                  exactness);
    }
    // The beams diverged after the prompt (the comparison would pass vacuously otherwise).
    const DecodeResult& last = shared.back();
    EXPECT_NE(std::vector<float>(last.logits_at(0), last.logits_at(0) + last.n_vocab),
              std::vector<float>(last.logits_at(1), last.logits_at(1) + last.n_vocab));
  }
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, SharedPromptTest, ::testing::Values(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0),
                         [](const ::testing::TestParamInfo<ggml_type>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

TEST(SessionKvCache, LanguageDetectionLeavesEveryBeamsCacheExactlyAsItWas) {
  TempDir dir("session-ml-beams");
  write_random_model(small_spec("tiny"), dir / "ml.bin");
  auto model = Model::load(dir / "ml.bin");
  SessionOptions options;
  options.n_threads = 2;
  Session detected(model, options), untouched(model, options);
  std::vector<float> first_probs;
  for (Session* s : {&detected, &untouched}) {
    s->encode(noise_audio(4000, 9));
    s->reset(3);
    const int sot = s->tokenizer().special().sot;
    decode(*s, {{sot, 50259, 400}, {sot, 50260, 401}, {sot, 50261, 402}});
  }
  first_probs = detected.detect_language();
  const std::vector<float> second_probs = detected.detect_language();  // twice: the restore restores all
  EXPECT_EQ(first_probs, second_probs);
  EXPECT_EQ(detected.n_past(), 3);
  EXPECT_EQ(detected.n_sequences(), 3);
  // Every sequence continues exactly as in the session that never detected.
  const std::vector<int> source = {2, 1, 0};
  detected.reorder(source);
  untouched.reorder(source);
  expect_same(decode(detected, {{500}, {501}, {502}}), decode(untouched, {{500}, {501}, {502}}), "after detection");

  // On an empty cache too, and its probabilities are those of a plain SOT step.
  Session fresh(model, options);
  fresh.encode(noise_audio(4000, 9));
  const std::vector<float> fresh_probs = fresh.detect_language();
  EXPECT_EQ(fresh_probs, first_probs);
  EXPECT_EQ(fresh.n_past(), 0);
  const DecodeResult sot_step = decode(fresh, {{fresh.tokenizer().special().sot}});
  EXPECT_EQ(fresh_probs,
            language_probabilities({sot_step.logits_at(0), static_cast<size_t>(sot_step.n_vocab)}, fresh.tokenizer()));
}

}  // namespace
}  // namespace earshot::whisper

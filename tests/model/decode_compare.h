// Comparing two decoder results: bit for bit, or to rounding where ggml computes
// the same values with kernels that sum in another order.
//
// With llamafile's tinyBLAS (scripts/bootstrap.sh, default ON) ggml takes a matrix
// product of two or more columns there and a one-column product with its own dot
// products: a step computed as one column (a lone single-token step, a prompt
// token shared by the beams) and the same step among other columns (batched
// sessions, every beam prefilled) then differ by rounding. Without llamafile
// they are bit-identical.
#pragma once

#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/asr_decoder.h"

namespace earshot::testing {

enum class Exactness { kBitForBit, kToRounding };

// What comparing one-column against many-column products may ask of this build.
inline Exactness across_batch_widths() {
  return ggml_cpu_has_llamafile() ? Exactness::kToRounding : Exactness::kBitForBit;
}

// Batches of 2-16 at tiny.en dimensions: max |logit diff| 5.8e-3 (earshot-bench-model --parts sessions).
inline constexpr float kRoundingLogits = 2e-2f;
inline constexpr float kRoundingAttention = 1e-3f;

// A logits row must still pick the same token, unless its two best logits lie
// within the rounding of each other.
inline void expect_same_choice(const float* a, const float* b, int n_vocab, const std::string& what) {
  const auto best = std::max_element(b, b + n_vocab) - b;
  float second = -INFINITY;
  for (int v = 0; v < n_vocab; ++v) {
    if (v != best) second = std::max(second, b[v]);
  }
  if (b[best] - second > 2 * kRoundingLogits) {
    EXPECT_EQ(std::max_element(a, a + n_vocab) - a, best) << what;
  }
}

inline float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float out = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) out = std::max(out, std::fabs(a[i] - b[i]));
  return out;
}

inline void expect_same_decode(const DecodeResult& a, const DecodeResult& b, const std::string& what,
                               Exactness exactness = Exactness::kBitForBit) {
  EXPECT_EQ(a.n_sequences, b.n_sequences) << what;
  EXPECT_EQ(a.n_positions, b.n_positions) << what;
  EXPECT_EQ(a.n_vocab, b.n_vocab) << what;
  EXPECT_EQ(a.n_heads, b.n_heads) << what;
  EXPECT_EQ(a.n_frames, b.n_frames) << what;
  if (exactness == Exactness::kBitForBit) {
    EXPECT_EQ(a.logits, b.logits) << what;
    EXPECT_EQ(a.attention, b.attention) << what;
    return;
  }
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  ASSERT_EQ(a.attention.size(), b.attention.size()) << what;
  EXPECT_LT(max_abs_difference(a.logits, b.logits), kRoundingLogits) << what;
  EXPECT_LT(max_abs_difference(a.attention, b.attention), kRoundingAttention) << what;
  for (size_t row = 0; a.n_vocab > 0 && row < a.logits.size() / a.n_vocab; ++row) {
    expect_same_choice(a.logits.data() + row * a.n_vocab, b.logits.data() + row * a.n_vocab, a.n_vocab, what);
  }
}

}  // namespace earshot::testing

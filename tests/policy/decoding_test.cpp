// Token decoders, alignment attention processing and text guards.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "policy/alignatt/alignment.h"
#include "policy/decoding/token_decoder.h"
#include "policy/text_utils.h"

namespace earshot::policy {
namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();
constexpr int32_t kEot = 4;

// Rows of a vocabulary of 5 (token 4 = EOT).
std::vector<float> rows(std::initializer_list<std::vector<float>> r) {
  std::vector<float> out;
  for (const auto& row : r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

TEST(GreedyDecoder, PicksArgmaxAndCompletesOnEot) {
  GreedyDecoder d(kEot);
  const int frame = 7;
  auto step = d.update(rows({{-2, -0.5f, -1, kNone, -3}}), 5, std::span<const int>(&frame, 1));
  EXPECT_FALSE(step.completed);
  EXPECT_EQ(step.source, std::vector<int>{0});
  const int frame2 = 9;
  step = d.update(rows({{-2, -1, -1, kNone, -0.1f}}), 5, std::span<const int>(&frame2, 1));
  EXPECT_TRUE(step.completed);
  const Sequence best = d.best();
  EXPECT_EQ(best.tokens, std::vector<int32_t>{1});
  EXPECT_EQ(best.frames, std::vector<int>{7});
  EXPECT_FLOAT_EQ(best.sum_logprob, -0.5f);
}

TEST(BeamSearchDecoder, FindsTheBestSumWhereGreedyWouldNot) {
  BeamSearchDecoder d(kEot, 2);
  const std::vector<int> frames = {1, 1};
  // Step 1 (both beams share the prompt): token 0 (-0.4) beats token 1 (-0.6).
  auto step = d.update(rows({{-0.4f, -0.6f, -5, -5, -5}, {-0.4f, -0.6f, -5, -5, -5}}), 5, frames);
  EXPECT_FALSE(step.completed);
  ASSERT_EQ(d.sequences().size(), 2u);
  EXPECT_EQ(d.sequences()[0].tokens, std::vector<int32_t>{0});
  EXPECT_EQ(d.sequences()[1].tokens, std::vector<int32_t>{1});
  EXPECT_EQ(step.source, (std::vector<int>{0, 0}));
  // Step 2: after token 0 everything is poor; after token 1, token 2 is near certain.
  step = d.update(rows({{-3, -3, -3, -3, -3}, {-5, -5, -0.05f, -5, -4}}), 5, std::vector<int>{2, 3});
  EXPECT_EQ(d.sequences()[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(step.source[0], 1);
  EXPECT_EQ(d.sequences()[0].frames, (std::vector<int>{1, 3}));
  // Step 3: both beams end.
  step = d.update(rows({{-9, -9, -9, -9, -0.01f}, {-9, -9, -9, -9, -0.02f}}), 5, std::vector<int>{4, 4});
  EXPECT_TRUE(step.completed);
  const Sequence best = d.best();
  EXPECT_EQ(best.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(best.sum_logprob, -0.6 - 0.05, 1e-6);
}

TEST(Decoding, SuppressAndLogSoftmax) {
  std::vector<float> row = {1, 2, 3};
  const std::vector<int32_t> banned = {2, 17};
  suppress(row, banned);
  EXPECT_EQ(row[2], kNone);
  log_softmax(row);
  EXPECT_NEAR(std::exp(row[0]) + std::exp(row[1]), 1.0, 1e-6);
  EXPECT_EQ(row[2], kNone);
}

TEST(Alignment, MedianFilterReplicatesEdges) {
  const std::vector<float> row = {5, 0, 0, 9, 0, 0, 0, 0};
  // Frame 0 sees {5,5,5,5,0,0,9}: median 5. A lone spike is removed.
  EXPECT_EQ(median_filtered_at(row, 0), 5);
  EXPECT_EQ(median_filtered_at(row, 3), 0);
  // The last frame sees {9,0,0,0,0,0,0} with its edge replicated: 0.
  EXPECT_EQ(median_filtered_at(row, 7), 0);
}

TEST(Alignment, ZNormalisedArgmaxFindsTheRowPlateau) {
  // 2 heads, 3 tokens, 40 frames; token t attends frames [5+10t, 11+10t].
  const int heads = 2, tokens = 3, frames = 40;
  std::vector<float> a(heads * tokens * frames, 0.0f);
  for (int h = 0; h < heads; ++h)
    for (int t = 0; t < tokens; ++t)
      for (int f = 5 + 10 * t; f < 12 + 10 * t; ++f) a[(h * tokens + t) * frames + f] = 1.0f;
  EXPECT_EQ(most_attended_frames(a, heads, tokens, frames, 40), (std::vector<int>{5, 15, 25}));
  // Cropped to 20 frames of content, the last token's best frame lies before its plateau.
  EXPECT_LT(most_attended_frames(a, heads, tokens, frames, 20)[2], 20);
}

TEST(Alignment, AccumulatorMatchesOfflineAndKeepsWindow) {
  AlignmentAccumulator acc(16);
  DecodeResult r;
  r.n_sequences = 1;
  r.n_heads = 1;
  r.n_frames = 60;
  for (int step = 0; step < 3; ++step) {
    // The first call carries the prompt: rows that attend nowhere, then the query row.
    r.n_tokens = step == 0 ? 3 : 1;
    r.attention.assign(r.n_tokens * 60, 0.0f);
    for (int f = 10 + 12 * step; f < 17 + 12 * step; ++f) r.attention[(r.n_tokens - 1) * 60 + f] = 1.0f;
    acc.add(r);
    EXPECT_EQ(acc.most_attended_frame(0, 60), 10 + 12 * step);
  }
}

TEST(TextUtils, Utf8Validity) {
  EXPECT_TRUE(is_valid_utf8(" caf\xC3\xA9"));
  EXPECT_FALSE(is_valid_utf8(" caf\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xA9"));
  EXPECT_FALSE(is_valid_utf8("\xEF\xBF\xBD"));  // U+FFFD
  EXPECT_TRUE(is_valid_utf8("\xE4\xBD\xA0\xE5\xA5\xBD"));
}

TEST(TextUtils, RepetitionDetector) {
  auto split = [](const std::string& s) {
    std::vector<std::string> w;
    std::string cur;
    for (char c : s) {
      if (c == ' ') {
        if (!cur.empty()) w.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) w.push_back(cur);
    return w;
  };
  EXPECT_EQ(find_repetition(split("a b la la la la la la la")), std::nullopt);  // 7 in a row
  EXPECT_EQ(find_repetition(split("a b la la la la la la la la")), 3u);         // 8: keep "a b la"
  EXPECT_EQ(find_repetition(split("x one two three one two three one two three one two three")), 4u);
  EXPECT_EQ(find_repetition(split("one two three one two three one two three")), std::nullopt);  // 9 words
  EXPECT_EQ(find_repetition(split("a b a b a b a b a b")), std::nullopt);                        // 2-gram x5 = 10 words
  EXPECT_EQ(find_repetition(split("a b a b a b a b a b a b")), 2u);                              // 2-gram x6 = 12 words
  EXPECT_EQ(normalize_word(" Hello,"), "hello");
  // A loop that lies wholly before the fresh words was judged already.
  EXPECT_EQ(find_repetition(split("la la la la la la la la x"), 9), std::nullopt);
  EXPECT_EQ(find_repetition(split("la la la la la la la la la"), 8), 1u);
}

}  // namespace
}  // namespace earshot::policy

// chrF against hand-computed values of the published definition (orders 1-6,
// beta 2, whitespace removed, means of per-order precision and recall).
#include "bench/chrf.h"

#include <gtest/gtest.h>

namespace earshot::bench {
namespace {

TEST(Chrf, IdenticalTextIs100AndWhitespaceIsIgnored) {
  EXPECT_DOUBLE_EQ(chrf("ab", "ab"), 100.0);
  EXPECT_DOUBLE_EQ(chrf("a b", "ab"), 100.0);
  EXPECT_DOUBLE_EQ(chrf("the cat", "thecat"), 100.0);
}

TEST(Chrf, HandComputedScores) {
  // Orders 1-3: P = R = (2/3 + 1/2 + 0) / 3 = 7/18.
  EXPECT_NEAR(chrf("abc", "abd"), 100.0 * 7 / 18, 1e-9);
  // P = (1 + 0) / 2, R = (1/2 + 0) / 2; F2 = 5 P R / (4 P + R) = 0.625 / 2.25.
  EXPECT_NEAR(chrf("a", "ab"), 100.0 * 0.625 / 2.25, 1e-9);
  // Clipped matches: one "a" of three. Orders 1-3: P = 1/9, R = 1/3; F2 = 5/21.
  EXPECT_NEAR(chrf("aaa", "a"), 100.0 * 5 / 21, 1e-9);
  // Beta weighs recall: swapping the texts gives another score.
  EXPECT_GT(chrf("ab", "a"), chrf("a", "ab"));
}

TEST(Chrf, CountsCodePointsNotBytes) {
  // 2 vs 3 characters: P = (1 + 1 + 0) / 3 = 2/3, R = (2/3 + 1/2 + 0) / 3 = 7/18;
  // F2 = 5 P R / (4 P + R) = 630/1485. As bytes it would have six orders.
  EXPECT_NEAR(chrf("\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xBD\xA0\xE5\xA5\xBD\xE5\x90\x97"), 100.0 * 630 / 1485, 1e-9);
}

TEST(Chrf, CorpusScoreSumsStatisticsFirst) {
  ChrfStats s = chrf_statistics("ab", "ab");
  s += chrf_statistics("abc", "abd");
  EXPECT_EQ(s.hypothesis[0], 5);
  EXPECT_EQ(s.matches[0], 4);
  // P = R = (4/5 + 2/3 + 0) / 3 = 22/45, not the mean of 100 and 38.9.
  EXPECT_NEAR(chrf_score(s), 100.0 * 22 / 45, 1e-9);
}

TEST(Chrf, EmptyTexts) {
  EXPECT_EQ(chrf("", ""), 0.0);
  EXPECT_EQ(chrf("", "ab"), 0.0);
  EXPECT_EQ(chrf("ab", ""), 0.0);
}

}  // namespace
}  // namespace earshot::bench

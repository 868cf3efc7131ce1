#include "bench/keyterm_recall.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace earshot::bench {
namespace {

TEST(KeytermRecall, CountsWholeWordSequencesWithoutOverlaps) {
  EXPECT_EQ(count_term("Parakeet, parakeets and PARAKEET.", "parakeet", NormalizerKind::kBasic), 2);
  EXPECT_EQ(count_term("new york new york new", "new york", NormalizerKind::kBasic), 2);
  EXPECT_EQ(count_term("aa aa aa", "aa aa", NormalizerKind::kBasic), 1);  // no overlaps
  EXPECT_EQ(count_term("anything", "", NormalizerKind::kBasic), 0);
  EXPECT_EQ(count_term("the cat", "the cat sat", NormalizerKind::kBasic), 0);
}

TEST(KeytermRecall, RecognisedIsPerUtteranceAndTheSurplusIsExtra) {
  const std::vector<std::string> refs = {"Ask Earshot about Parakeet", "Parakeet and Parakeet again", "nothing here"};
  const std::vector<std::string> hyps = {"ask ear shot about parakeet", "parakeet again", "parakeet here earshot"};
  const KeytermSummary s =
      score_keyterms({"Earshot", "Parakeet", "Sortformer", "  "}, refs, hyps, NormalizerKind::kBasic);
  ASSERT_EQ(s.terms.size(), 3u);  // the blank term is left out
  EXPECT_EQ(s.terms[0].term, "Earshot");
  EXPECT_EQ(s.terms[0].in_references, 1);
  EXPECT_EQ(s.terms[0].recognised, 0);  // split into two words: not the term
  EXPECT_EQ(s.terms[0].extra, 1);       // said where the reference has none
  EXPECT_EQ(s.terms[1].in_references, 3);
  EXPECT_EQ(s.terms[1].recognised, 2);  // 1 of 1, then 1 of 2
  EXPECT_EQ(s.terms[1].extra, 1);       // the third utterance's
  EXPECT_EQ(s.terms[2].in_references, 0);
  EXPECT_EQ(s.in_references, 4);
  EXPECT_EQ(s.recognised, 2);
  EXPECT_EQ(s.extra, 2);
  ASSERT_TRUE(s.recall());
  EXPECT_DOUBLE_EQ(*s.recall(), 0.5);
}

TEST(KeytermRecall, NoOccurrenceNoRecallAndMismatchedListsAreABug) {
  EXPECT_FALSE(score_keyterms({"zebra"}, {"a cat"}, {"a cat"}, NormalizerKind::kBasic).recall());
  EXPECT_THROW(score_keyterms({"zebra"}, {"a"}, {}, NormalizerKind::kBasic), Error);
}

}  // namespace
}  // namespace earshot::bench

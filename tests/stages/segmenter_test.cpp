#include <gtest/gtest.h>

#include "stages/translation/translation_stage.h"

namespace earshot::stages::translation {
namespace {

Word word(const std::string& text, double start, double end) { return Word{text, start, end, -1, "", -1}; }

events::Event words(std::vector<Word> w) { return events::WordsCommitted{std::move(w)}; }

TEST(Segmenter, PunctuationClosesOnlyAfterTheSoftMaximum) {
  TranslationOptions o;  // soft 4 s, hard 20 s
  Segmenter s(o);
  EXPECT_TRUE(s.on_event(words({word("Hi.", 0.0, 0.5)})).empty());  // 0.5 s: too short
  EXPECT_TRUE(s.on_event(words({word(" So", 1.0, 1.5), word(" then", 2.0, 3.9)})).empty());
  auto closed = s.on_event(words({word(" yes.", 4.0, 4.5), word(" Next", 5.0, 5.5)}));
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].segment, 0);
  EXPECT_EQ(closed[0].source, "Hi. So then yes.");
  EXPECT_DOUBLE_EQ(closed[0].start, 0.0);
  EXPECT_DOUBLE_EQ(closed[0].end, 4.5);
  EXPECT_EQ(s.segment(), 1);
  EXPECT_EQ(s.committed(), "Next");  // the rest opens the next segment, without its leading space
  EXPECT_DOUBLE_EQ(s.start(), 5.0);
}

TEST(Segmenter, CjkPunctuationCounts) {
  TranslationOptions o;
  Segmenter s(o);
  s.on_event(words({word("\xE4\xBD\xA0", 0.0, 2.0)}));
  auto closed = s.on_event(words({word("\xE5\xA5\xBD\xE3\x80\x82", 2.0, 4.2)}));
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].source, "\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82");
}

TEST(Segmenter, TheHardMaximumAlwaysCloses) {
  TranslationOptions o;
  o.hard_max_seconds = 10;
  Segmenter s(o);
  std::vector<SegmentClose> closed;
  for (int i = 0; i < 12; ++i) {
    auto c = s.on_event(words({word(" w", i, i + 0.9)}));
    closed.insert(closed.end(), c.begin(), c.end());
  }
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_DOUBLE_EQ(closed[0].end, 10.9);  // the first word reaching 10 s
}

TEST(Segmenter, ALongPauseClosesAtItsEnd) {
  TranslationOptions o;
  o.pause_seconds = 2;
  Segmenter s(o);
  s.on_event(words({word("a", 0, 1)}));
  EXPECT_TRUE(s.on_event(events::Pause{1, 4, true}).empty());     // still going on
  EXPECT_TRUE(s.on_event(events::Pause{1, 2.5, false}).empty());  // shorter than the threshold
  auto closed = s.on_event(events::Pause{1, 4, false});
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].source, "a");
  EXPECT_TRUE(s.on_event(events::Pause{5, 9, false}).empty());  // nothing open
}

TEST(Segmenter, FlushAndEndOfStreamClose) {
  TranslationOptions o;
  Segmenter s(o);
  s.on_event(words({word("a", 0, 1)}));
  EXPECT_EQ(s.on_event(events::Finalized{1}).size(), 1u);
  s.on_event(words({word(" b", 2, 3)}));
  auto closed = s.on_event(events::EndOfStream{});
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].segment, 1);
  EXPECT_EQ(closed[0].source, "b");
  EXPECT_TRUE(s.on_event(events::EndOfStream{}).empty());
}

TEST(Segmenter, TailWordsBehindTheCommitBoundaryAreStale) {
  TranslationOptions o;
  Segmenter s(o);
  s.on_event(words({word("a", 0, 1), word(" b", 1, 2)}));
  s.on_event(events::ProvisionalChanged{{word(" b", 1, 2), word(" c", 2, 3)}});
  EXPECT_EQ(s.tail(), " c");
}

}  // namespace
}  // namespace earshot::stages::translation

// AlignAtt guards: UTF-8 fragments, the token budget, the repetition detector,
// stale words. A guard only stops a pass early or drops words from output and
// state together; switched off, the policy does what SimulStreaming does.
#include <gtest/gtest.h>

#include "alignatt_rig.h"

namespace earshot::policy::testing {
namespace {

struct Guards : ::testing::Test {
  std::shared_ptr<const whisper::Tokenizer> t = english_tokenizer();
  int32_t eot = t->special().eot;
  int32_t hello = tok(*t, " hello"), one = tok(*t, " one"), two = tok(*t, " two"), three = tok(*t, " three"),
          la = tok(*t, " la"), x = tok(*t, " x");
  int32_t c3 = byte_token(*t, "\xC3"), a9 = byte_token(*t, "\xA9");
  FakeDecoder::Script passes(std::vector<std::vector<Step>> p) { return FakeDecoder::from_passes(std::move(p), eot); }
};

TEST_F(Guards, Utf8FragmentIsHeldUntilTheCharacterCompletes) {
  Rig rig(t, passes({{{hello, 5}, {one, 12}, {c3, 19}, {x, 40}}, {{a9, 30}, {two, 45}, {x, 90}}}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" hello", 0.1, 0.24}});
  EXPECT_EQ(rig.processor->committed_blocks()[0], (std::vector<int32_t>{hello, one, c3}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" one\xC3\xA9", 0.24, 0.9}, {" two", 0.9, 1.0}});
  EXPECT_TRUE(rig.warnings->empty());
}

TEST_F(Guards, Utf8FragmentOfMoreThanTenTokensIsDroppedWithAWarning) {
  Rig rig(t, passes({{{hello, 5}, {one, 12}, {c3, 19}, {x, 40}},
                     {{c3, 26}, {c3, 33}, {c3, 40}, {c3, 47}, {c3, 54}, {x, 90}},
                     {{c3, 61}, {c3, 68}, {c3, 75}, {c3, 82}, {x, 140}},
                     {{two, 150}, {x, 190}}}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" hello", 0.1, 0.24}});
  rig.feed(1.0);
  EXPECT_TRUE(rig.run().empty());  // 7 tokens, still incomplete: held
  EXPECT_TRUE(rig.warnings->empty());
  rig.feed(1.0);
  EXPECT_TRUE(rig.run().empty());  // 11 tokens: dropped
  EXPECT_TRUE(rig.warned("incomplete UTF-8"));
  rig.feed(1.0);
  expect_words(rig.run(), {{" two", 3.0, 3.1}});
}

std::vector<Step> distinct_tokens(int n) {
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) steps.push_back({1000 + i, i});
  return steps;
}

TEST_F(Guards, TokenBudgetTruncatesThePassInsteadOfDiscardingIt) {
  // 2 s of audio: budget max(50, 2 * 22.5) = 50 decoder steps, the EOT step included.
  Rig within(t, passes({distinct_tokens(49)}));
  within.feed(2.0);
  within.run();
  ASSERT_EQ(within.processor->committed_blocks().size(), 1u);
  EXPECT_EQ(within.processor->committed_blocks()[0].size(), 49u);
  EXPECT_TRUE(within.warnings->empty());

  // Over it, decoding stops at the budget and the 50 tokens decoded are committed.
  Rig over(t, passes({distinct_tokens(60)}));
  over.feed(2.0);
  EXPECT_FALSE(over.run().empty());
  std::vector<int32_t> first_fifty;
  for (const Step& s : distinct_tokens(50)) first_fifty.push_back(s.token);
  ASSERT_EQ(over.processor->committed_blocks().size(), 1u);
  EXPECT_EQ(over.processor->committed_blocks()[0], first_fifty);
  EXPECT_TRUE(over.warned("token budget of 50"));

  // Guards off: no budget, as the reference; all 60 tokens and the EOT step.
  AlignAttConfig off;
  off.set_guards(false);
  Rig reference(t, passes({distinct_tokens(60)}), off);
  reference.feed(2.0);
  reference.run();
  EXPECT_EQ(reference.processor->committed_blocks()[0].size(), 60u);
  EXPECT_TRUE(reference.warnings->empty());
}

// A budget of exactly `n` decoder calls for a few seconds of audio.
AlignAttConfig budget_of(int n) {
  AlignAttConfig c;
  c.min_token_budget = n;
  c.tokens_per_second_budget = 0.01;
  return c;
}

TEST_F(Guards, RepeatedWordResetsTheSegment) {
  // The pass runs into the budget (12 calls, 12 tokens): the loop is cut.
  std::vector<Step> steps = {{one, 0}, {two, 7}};
  for (int i = 0; i < 10; ++i) steps.push_back({la, 14 + 7 * i});
  Rig rig(t, passes({steps}), budget_of(12));
  rig.feed(3.0);
  expect_words(rig.run(), {{" one", 0.0, 0.14}, {" two", 0.14, 0.28}, {" la", 0.28, 0.42}});
  EXPECT_TRUE(rig.warned("repetition"));
  // The segment restarts after the last good word, with an empty context.
  EXPECT_DOUBLE_EQ(rig.processor->buffer_start_time(), 0.42);
  EXPECT_NEAR(rig.processor->buffered_seconds(), 3.0 - 0.42, 1e-9);
  EXPECT_TRUE(rig.processor->committed_blocks().empty());
  EXPECT_TRUE(rig.processor->context_tokens().empty());
}

TEST_F(Guards, RepeatedNgramResetsTheSegment) {
  std::vector<Step> steps = {{hello, 0}};
  for (int i = 0; i < 12; ++i) steps.push_back({std::vector<int32_t>{one, two, three}[i % 3], 7 + 7 * i});
  Rig rig(t, passes({steps}), budget_of(13));
  rig.feed(3.0);
  expect_words(rig.run(), {{" hello", 0.0, 0.14}, {" one", 0.14, 0.28}, {" two", 0.28, 0.42}, {" three", 0.42, 0.56}});
  EXPECT_TRUE(rig.warned("repetition"));
}

TEST_F(Guards, RepetitionThatEndsNormallyIsCommittedWhole) {
  // The same loop ending at EOT: the reference commits it, so does the guard.
  std::vector<Step> steps = {{one, 0}, {two, 7}};
  for (int i = 0; i < 10; ++i) steps.push_back({la, 14 + 7 * i});
  Rig rig(t, passes({steps}));
  rig.feed(3.0);
  EXPECT_EQ(rig.run().size(), 12u);
  EXPECT_FALSE(rig.warned("repetition"));
  ASSERT_EQ(rig.processor->committed_blocks().size(), 1u);
  EXPECT_EQ(rig.processor->committed_blocks()[0].size(), 12u);
  EXPECT_DOUBLE_EQ(rig.processor->buffer_start_time(), 0.0);
}

// The forced prefix, as one list.
std::vector<int32_t> forced(const AlignAttProcessor& p) {
  std::vector<int32_t> all;
  for (const auto& b : p.committed_blocks()) all.insert(all.end(), b.begin(), b.end());
  return all;
}

TEST_F(Guards, StaleWordsAreNotCommittedTwice) {
  // After a long-silence reset the same audio time cannot be committed again.
  Rig rig(t, passes({{{one, 10}}, {{two, 5}}}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.2, 0.3}});
  rig.processor->end_silence(6.0, 0.0);  // a caller moving time backwards
  rig.feed(1.0);
  EXPECT_TRUE(rig.run().empty());  // " two" would end at 0.2 <= 0.3 + 0.05
  // Dropped from the output and from the state alike.
  EXPECT_TRUE(forced(*rig.processor).empty());
}

TEST_F(Guards, WithoutAResetEveryDecodedWordIsCommittedAndForced) {
  // " three" attends before the end of " two" (non-monotonic attention): the
  // reference commits it; its time is clamped after " two".
  Rig rig(t, passes({{{one, 10}, {two, 40}}, {{three, 20}}}));
  rig.feed(2.0);
  expect_words(rig.run(), {{" one", 0.2, 0.8}, {" two", 0.8, 0.9}});
  rig.feed(1.0);
  expect_words(rig.run(), {{" three", 0.9, 0.9}});
  EXPECT_EQ(forced(*rig.processor), (std::vector<int32_t>{one, two, three}));
}

}  // namespace
}  // namespace earshot::policy::testing

// LocalAgreement-2 against a scripted decoder: commits the longest common
// prefix of consecutive hypotheses, with word times from the attention.
#include <gtest/gtest.h>

#include "common/error.h"
#include "fake_decoder.h"
#include "policy/localagreement/local_agreement_processor.h"
#include "test_helpers.h"

namespace earshot::policy::testing {
namespace {

struct LocalAgreement : ::testing::Test {
  std::shared_ptr<const whisper::Tokenizer> t = english_tokenizer();
  int32_t eot = t->special().eot;
  int32_t one = tok(*t, " one"), two = tok(*t, " two"), three = tok(*t, " three"), four = tok(*t, " four"),
          five = tok(*t, " five"), six = tok(*t, " six"), seven = tok(*t, " seven");
  FakeDecoder* fake = nullptr;
  std::unique_ptr<LocalAgreementProcessor> make(std::vector<std::vector<Step>> passes,
                                                LocalAgreementConfig config = {}) {
    auto decoder = std::make_unique<FakeDecoder>(t, FakeDecoder::from_passes(std::move(passes), eot));
    fake = decoder.get();
    return std::make_unique<LocalAgreementProcessor>(std::move(decoder), std::move(config));
  }
};

TEST_F(LocalAgreement, CommitsTheCommonPrefixOfTwoHypotheses) {
  auto p = make({{{one, 10}, {two, 30}, {three, 40}},
                 {{one, 10}, {two, 30}, {four, 60}, {five, 80}},
                 {{one, 10}, {two, 30}, {four, 60}, {five, 80}, {six, 110}},
                 {{four, 60}, {five, 80}, {six, 110}, {seven, 140}}});
  auto feed = [&](double until) {
    const auto pcm = seconds(until - p->buffer_start_time() - p->buffered_seconds());
    p->insert_audio(pcm, until);
  };
  feed(1.0);
  EXPECT_TRUE(p->process().committed.empty());
  // The last word ends 0.1 s after its start.
  expect_words(p->provisional(), {{" one", 0.2, 0.6}, {" two", 0.6, 0.8}, {" three", 0.8, 0.9}});
  feed(2.0);
  expect_words(p->process().committed, {{" one", 0.2, 0.6}, {" two", 0.6, 1.2}});
  expect_words(p->provisional(), {{" four", 1.2, 1.6}, {" five", 1.6, 1.7}});
  feed(3.0);
  expect_words(p->process().committed, {{" four", 1.2, 1.6}, {" five", 1.6, 2.2}});
  expect_words(p->provisional(), {{" six", 2.2, 2.3}});
  // The prompt of the last pass is empty (nothing committed lies before the buffer).
  EXPECT_EQ(fake->prompts[2], (std::vector<int32_t>{t->special().sot, t->special().no_timestamps}));
  feed(3.5);
  expect_words(p->finish().committed, {{" six", 2.2, 2.8}, {" seven", 2.8, 2.9}});
  EXPECT_TRUE(p->provisional().empty());
  EXPECT_EQ(p->hypothesis().size(), 6u);
}

TEST_F(LocalAgreement, TrimsTheBufferAtACommittedSentenceEndAndPromptsWithIt) {
  const int32_t end = tok(*t, " end"), dot = tok(*t, ".");
  LocalAgreementConfig c;
  c.buffer_trimming_sec = 2.0;
  c.buffer_hard_limit_sec = 25.0;
  auto p = make(
      {{{one, 10}, {end, 40}, {dot, 50}, {two, 100}}, {{one, 10}, {end, 40}, {dot, 50}, {two, 100}}, {{three, 10}}}, c);
  const auto pcm = seconds(2.5);
  p->insert_audio(pcm, 2.5);
  EXPECT_TRUE(p->process().committed.empty());
  // Punctuation is a word of its own, as in Whisper's word splitting.
  expect_words(p->process().committed, {{" one", 0.2, 0.8}, {" end", 0.8, 1.0}, {".", 1.0, 2.0}, {" two", 2.0, 2.1}});
  // 2.5 s > 2 s: cut after the sentence end "." (ends at 2.0 s where " two" starts).
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 2.0);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 0.5);
  p->process();
  EXPECT_EQ(fake->prompts[2].front(), t->special().sot_prev);
  EXPECT_EQ(t->decode(std::vector<int32_t>(fake->prompts[2].begin() + 1, fake->prompts[2].end() - 2)), " one end.");
}

TEST_F(LocalAgreement, ALoopingDecodeIsCutAtItsSecondRepetition) {
  std::vector<Step> loop = {{one, 10}};
  for (int i = 0; i < 9; ++i) loop.push_back({two, 17 + 7 * i});
  auto p = make({loop});
  const auto pcm = seconds(2.0);
  p->insert_audio(pcm, 2.0);
  expect_words(p->transcribe({}), {{" one", 0.2, 0.34}, {" two", 0.34, 0.48}});
}

}  // namespace
TEST_F(LocalAgreement, TheStaticPromptIsAlwaysFirstAndNeverTrimmed) {
  const int32_t end = tok(*t, " end"), dot = tok(*t, ".");
  LocalAgreementConfig c;
  c.buffer_trimming_sec = 2.0;
  c.static_prompt = " earshot, Parakeet";
  auto p = make(
      {{{one, 10}, {end, 40}, {dot, 50}, {two, 100}}, {{one, 10}, {end, 40}, {dot, 50}, {two, 100}}, {{three, 10}}}, c);
  p->insert_audio(seconds(2.5), 2.5);
  p->process();
  p->process();
  p->process();
  auto text_of = [&](const std::vector<int32_t>& prompt) {
    EXPECT_EQ(prompt.front(), t->special().sot_prev);
    return t->decode(std::vector<int32_t>(prompt.begin() + 1, prompt.end() - 2));
  };
  EXPECT_EQ(text_of(fake->prompts[0]), " earshot, Parakeet");  // nothing committed yet: the static part alone
  EXPECT_EQ(text_of(fake->prompts[2]), " earshot, Parakeet one end.");
  // At most half the text context: a longer one is refused, naming what fits.
  c.static_prompt.clear();
  for (int i = 0; i < 400; ++i) c.static_prompt += " word";
  EXPECT_THROW(make({}, c), Error);
}

}  // namespace earshot::policy::testing

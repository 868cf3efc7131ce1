// The translation capacity run (bench/translation_capacity.h) on the scripted
// fake LLM, in real time over 2 s streams (~5 s in all): a fast model sustains
// two streams with every final in; a slow one on one worker falls behind, skips
// drafts (never finals) and is reported as not sustained.
#include "bench/translation_capacity.h"

#include <gtest/gtest.h>

#include "../stages/fake_llm.h"

namespace earshot::bench {
namespace {

namespace tr = stages::translation;

std::shared_ptr<earshot::testing::FakeModel> fake() {
  return std::make_shared<earshot::testing::FakeModel>(earshot::testing::word_for_word(2));
}

std::shared_ptr<tr::TranslationService> service(std::shared_ptr<earshot::testing::FakeModel> model) {
  tr::CalibrationRegistry registry;
  registry.add({"hy-mt2-1.8b", "en", "zh", {{0, 0}, {0, 1}}, {}});
  tr::TranslationOptions o;
  o.target_language = "zh";
  o.soft_max_seconds = 1.0;
  o.redraft_source_tokens = 1;
  return std::make_shared<tr::TranslationService>(std::move(model), std::move(registry), 1, o);
}

TranslationCapacityOptions short_streams() {
  TranslationCapacityOptions o;
  o.stream_seconds = 2.0;
  o.emission_seconds = 0.25;
  o.words_per_second = 4.0;
  o.sentence_words = 5;
  o.drain_limit = 20;
  return o;
}

TEST(TranslationCapacity, TheScriptSpeaksSentencesAtTheRate) {
  const std::vector<Word> words = scripted_source(short_streams());
  ASSERT_EQ(words.size(), 8u);
  EXPECT_EQ(words[0].text, "the");
  EXPECT_EQ(words[4].text.back(), '.');
  EXPECT_DOUBLE_EQ(words[3].start, 0.75);
  EXPECT_DOUBLE_EQ(words[3].end, 0.95);
}

TEST(TranslationCapacity, AFastModelSustainsTwoStreams) {
  auto model = fake();
  auto svc = service(model);
  const TranslationCapacityRun run = run_translation_capacity(*svc, 2, short_streams());
  EXPECT_TRUE(run.drained);
  EXPECT_EQ(run.skipped_drafts, 0);
  EXPECT_GT(run.draft_calls, 0);
  // Each stream: the sentence its period closes, then the rest at its end.
  EXPECT_EQ(run.finals_arrived, 4);
  EXPECT_EQ(run.final_calls, 4);
  EXPECT_EQ(run.final_lag.count, 4);
  EXPECT_GE(run.final_lag.min, 0.0);
  EXPECT_DOUBLE_EQ(run.audio_seconds, 4.0);
  EXPECT_TRUE(run.sustained);
}

TEST(TranslationCapacity, ASlowModelSkipsDraftsButNoFinals) {
  auto model = fake();
  model->decode_delay_ms = 40;  // a draft of ~5 decodes: 0.2 s, four streams every 0.25 s on one worker
  auto svc = service(model);
  const TranslationCapacityRun run = run_translation_capacity(*svc, 4, short_streams());
  EXPECT_TRUE(run.drained);
  EXPECT_GT(run.skipped_drafts, 0);
  EXPECT_EQ(run.finals_arrived, 8);
  EXPECT_EQ(run.final_calls, 8);
  EXPECT_FALSE(run.sustained);
}

}  // namespace
}  // namespace earshot::bench

// The translation capacity run (bench/translation_capacity.h) on the scripted
// fake LLM over 3 s streams, on a stepped clock (no test waits out the streams'
// real time): a fast model, whose every job is done before the clock moves on,
// sustains two streams with every final in; a model stuck in a decode while the
// streams go on skips drafts (never finals).
#include "bench/translation_capacity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../stages/fake_llm.h"
#include "../support/wait.h"
#include "stepped_clock.h"

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

using earshot::testing::SteppedClock;

TranslationCapacityOptions short_streams() {
  TranslationCapacityOptions o;
  o.stream_seconds = 3.0;
  o.emission_seconds = 0.5;
  o.words_per_second = 4.0;
  o.sentence_words = 5;
  o.drain_limit = 20;
  return o;
}

TEST(TranslationCapacity, TheScriptSpeaksSentencesAtTheRate) {
  const std::vector<Word> words = scripted_source(short_streams());
  ASSERT_EQ(words.size(), 12u);
  EXPECT_EQ(words[0].text, "the");
  EXPECT_EQ(words[4].text.back(), '.');
  EXPECT_DOUBLE_EQ(words[3].start, 0.75);
  EXPECT_DOUBLE_EQ(words[3].end, 0.95);
}

TEST(TranslationCapacity, AFastModelSustainsTwoStreams) {
  auto model = fake();
  auto svc = service(model);
  SteppedClock clock(svc.get());
  const TranslationCapacityRun run = run_translation_capacity(*svc, 2, short_streams(), &clock);
  EXPECT_TRUE(run.drained);
  EXPECT_GT(run.draft_calls, 0);
  // Each stream: the two sentences their periods close, then the rest at its end.
  EXPECT_EQ(run.finals_arrived, 6);
  EXPECT_EQ(run.final_calls, 6);
  EXPECT_EQ(run.final_lag.count, 6);
  EXPECT_GE(run.final_lag.min, 0.0);
  EXPECT_GT(run.draft_interval.count, 0);
  EXPECT_LE(run.draft_interval.p90, 1.0);
  EXPECT_DOUBLE_EQ(run.audio_seconds, 6.0);
  EXPECT_TRUE(run.sustained);
}

TEST(TranslationCapacity, ASlowModelSkipsDraftsButNoFinals) {
  auto model = fake();
  // The model's first decode lasts until a draft was skipped: four streams go on
  // feeding the one worker meanwhile, each newer draft replacing a queued one.
  earshot::testing::Gate gate;
  auto svc = service(model);
  model->on_decode = [&gate, first = std::make_shared<std::atomic<bool>>(true)] {
    if (first->exchange(false)) {
      EXPECT_TRUE(gate.wait()) << "no draft was skipped";
    }
  };
  std::thread opener([&] {
    EXPECT_TRUE(earshot::testing::eventually([&] { return svc->counts().skipped_drafts > 0; }))
        << "no draft was skipped";
    gate.open();
  });
  SteppedClock clock;
  const TranslationCapacityRun run = run_translation_capacity(*svc, 4, short_streams(), &clock);
  opener.join();
  EXPECT_TRUE(run.drained);
  EXPECT_GT(run.skipped_drafts, 0);
  EXPECT_EQ(run.finals_arrived, 12);
  EXPECT_EQ(run.final_calls, 12);
}

}  // namespace
}  // namespace earshot::bench

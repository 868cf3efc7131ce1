// The translation benchmarks' reference workload (bench/translation_reference.h)
// over the scripted fake LLM, whose own "translation" (the source upper-cased)
// the decorator overrides: the reference's choices, an engine over it that
// copies its source and re-drafts only new tokens, and the capacity run's
// committed-target delay per source word on a stepped clock.
#include "bench/translation_reference.h"

#include <gtest/gtest.h>

#include "../stages/fake_llm.h"
#include "bench/translation_capacity.h"
#include "stages/translation/engine.h"
#include "stepped_clock.h"

namespace earshot::bench {
namespace {

namespace tr = stages::translation;
using earshot::testing::FakeModel;

TEST(ReferenceTranslation, TheNextTokenContinuesTheSourceThenEnds) {
  TranslationReferenceOptions o;
  o.prompt_before = {100, 101};
  o.prompt_after = {200};
  const llm::Token end = 7;
  EXPECT_EQ(reference_next({100, 101, 5, 6}, o, end), -1);            // no whole prompt yet
  EXPECT_EQ(reference_next({100, 101, 5, 6, 200}, o, end), 5);        // the source's first token
  EXPECT_EQ(reference_next({100, 101, 5, 6, 200, 5}, o, end), 6);     // then the next
  EXPECT_EQ(reference_next({100, 101, 5, 6, 200, 5, 6}, o, end), 7);  // the whole source: the end
  EXPECT_EQ(reference_next({100, 101, 5, 6, 200, 9}, o, end), 7);     // off the reference: the end
  EXPECT_EQ(reference_next({99, 101, 5, 6, 200}, o, end), -1);        // not the engine's prompt
}

std::shared_ptr<FakeModel> fake() { return std::make_shared<FakeModel>(earshot::testing::word_for_word(2)); }

std::shared_ptr<const llm::LlmModel> reference_of(const std::shared_ptr<FakeModel>& model) {
  return reference_translation_model(model, translation_reference_prompt(*model, "en", "zh"));
}

TEST(ReferenceTranslation, AnEngineOverItCopiesItsSourceAndReDraftsOnlyTheNewTokens) {
  auto model = fake();
  auto reference = reference_of(model);
  tr::EngineOptions eo;
  eo.target_language = "zh";
  eo.heads = {{0, 0}, {0, 1}};
  eo.commit.mode = tr::CommitMode::kArgmax;
  eo.redraft_source_tokens = 1;
  tr::TranslationEngine engine(*reference, eo);
  // Target token j attends to source token j: what the committed source holds commits.
  tr::EngineUpdate u = engine.update("the meeting", " starts at");
  EXPECT_TRUE(u.called_model);
  EXPECT_EQ(u.committed, "the meeting");
  EXPECT_EQ(u.draft, " starts at");
  const tr::EngineStats first = engine.stats();
  EXPECT_EQ(first.generated, 4);
  // The re-draft verifies the last draft's rest (" starts at"), all of it
  // still the reference's, and steps only the new token.
  u = engine.update("the meeting starts at nine", "");
  EXPECT_TRUE(u.called_model);
  EXPECT_EQ(u.committed, " starts at nine");
  EXPECT_EQ(u.draft, "");
  const tr::EngineStats second = engine.stats();
  EXPECT_EQ(second.proposed - first.proposed, 2);
  EXPECT_EQ(second.accepted - first.accepted, 2);
  // " nine" is the batch's last choice; one step decodes it to find the end.
  EXPECT_EQ(second.stepped - first.stepped, 1);
  EXPECT_EQ(second.generated - first.generated, 3);
  // The final copies the whole source; its last draft was all of it.
  EXPECT_EQ(engine.translate("the meeting starts at nine"), "the meeting starts at nine");
  EXPECT_EQ(engine.stats().accepted - second.accepted, 5);
}

TEST(ReferenceTranslation, AModelWithoutAnEndOfGenerationTokenIsRefused) {
  // The fake model's vocabulary always has <|im_end|>; an empty "after" part is the other refusal.
  TranslationReferenceOptions o;
  EXPECT_THROW(reference_translation_model(fake(), o), Error);
}

TEST(ReferenceTranslation, TheCapacityRunMeasuresEverySourceWordsCommittedTarget) {
  auto model = fake();
  tr::CalibrationRegistry registry;
  registry.add({model->id(), "en", "zh", {{0, 0}, {0, 1}}, {}});
  tr::TranslationOptions o;
  o.target_language = "zh";
  o.soft_max_seconds = 1.0;
  o.redraft_source_tokens = 1;
  o.commit.mode = tr::CommitMode::kArgmax;
  tr::TranslationService service(reference_of(model), std::move(registry), 1, o);
  TranslationCapacityOptions co;
  co.stream_seconds = 3.0;
  co.emission_seconds = 0.5;
  co.words_per_second = 4.0;
  co.sentence_words = 5;
  co.drain_limit = 20;
  co.target_copies_source = true;
  earshot::testing::SteppedClock clock(&service);
  const TranslationCapacityRun run = run_translation_capacity(service, 2, co, &clock);
  EXPECT_TRUE(run.drained);
  EXPECT_EQ(run.off_reference_segments, 0);
  // Every word of both streams, once each.
  EXPECT_EQ(run.commit_delay.count, 24);
  // A model that takes no time: each word's translation commits at the feed
  // that commits the word (argmax mode: target j once source j is committed),
  // or, for the words the end of the stream commits, with their final.
  EXPECT_DOUBLE_EQ(run.commit_delay.max, 0.0);
  // Without the flag nothing is measured.
  co.target_copies_source = false;
  const TranslationCapacityRun plain = run_translation_capacity(service, 1, co, &clock);
  EXPECT_EQ(plain.commit_delay.count, 0);
}

}  // namespace
}  // namespace earshot::bench

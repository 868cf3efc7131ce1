#include "stages/translation/engine.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "fake_llm.h"

namespace earshot::stages::translation {
namespace {

using earshot::testing::FakeModel;
using earshot::testing::peaked;
using earshot::testing::PlaceholderMode;
using earshot::testing::ScriptToken;
using earshot::testing::word_for_word;

EngineOptions argmax_options() {
  EngineOptions o;
  o.source_language = "en";
  o.target_language = "de";
  o.heads = {{9, 5}, {13, 1}};
  o.commit.mode = CommitMode::kArgmax;
  return o;
}

TEST(TranslationEngine, CommitsWhatDependsOnCommittedSourceAndDraftsTheRest) {
  FakeModel model(word_for_word(2));
  TranslationEngine engine(model, argmax_options());
  EngineUpdate u = engine.update("alpha beta", " gamma delta");
  EXPECT_TRUE(u.called_model);
  EXPECT_EQ(u.committed, "ALPHA BETA");
  EXPECT_EQ(u.draft, " GAMMA DELTA");
  EXPECT_TRUE(u.draft_changed);
  EXPECT_EQ(engine.committed_text(), "ALPHA BETA");
}

TEST(TranslationEngine, ReleasesHeldTokensFromTheCachedDraftWithoutAModelCall) {
  FakeModel model(word_for_word(2));
  TranslationEngine engine(model, argmax_options());
  engine.update("alpha beta", " gamma delta");
  const int calls = model.prompt_decodes;
  const int decodes = model.decode_calls;
  EngineUpdate u = engine.update("alpha beta gamma", " delta");
  EXPECT_FALSE(u.called_model);
  EXPECT_EQ(model.decode_calls, decodes);  // nothing decoded at all
  EXPECT_EQ(model.prompt_decodes, calls);
  EXPECT_EQ(u.committed, " GAMMA");
  EXPECT_EQ(u.draft, " DELTA");
  EXPECT_EQ(engine.stats().releases, 1);
  // The committed source outgrows the cached span: a fresh draft, continuing the committed target.
  u = engine.update("alpha beta gamma delta epsilon", "");
  EXPECT_TRUE(u.called_model);
  EXPECT_EQ(model.prompt_decodes, calls + 1);
  EXPECT_EQ(u.committed, " DELTA EPSILON");
  EXPECT_EQ(u.draft, "");
  EXPECT_EQ(engine.committed_text(), "ALPHA BETA GAMMA DELTA EPSILON");
}

TEST(TranslationEngine, RedraftsOnlyAfterEnoughNewSourceTokens) {
  FakeModel model(word_for_word(2));
  EngineOptions o = argmax_options();
  o.redraft_source_tokens = 3;
  TranslationEngine engine(model, o);
  engine.update("alpha", " beta");
  EXPECT_EQ(engine.stats().drafts, 1);
  EngineUpdate u = engine.update("alpha", " beta gamma delta");  // 2 new tokens: below the hysteresis
  EXPECT_FALSE(u.called_model);
  EXPECT_FALSE(u.draft_changed);  // identical consecutive drafts are not re-sent
  EXPECT_EQ(u.draft, " BETA");
  u = engine.update("alpha", " beta gamma delta eta");  // 3 new tokens
  EXPECT_TRUE(u.called_model);
  EXPECT_EQ(u.draft, " BETA GAMMA DELTA ETA");
  EXPECT_EQ(engine.stats().drafts, 2);
}

// The same updates from an engine that verifies and one that only steps.
void expect_same_updates(const EngineUpdate& a, const EngineUpdate& b) {
  EXPECT_EQ(a.committed, b.committed);
  EXPECT_EQ(a.draft, b.draft);
  EXPECT_EQ(a.draft_changed, b.draft_changed);
  EXPECT_EQ(a.called_model, b.called_model);
}

TEST(TranslationEngine, ARedraftVerifiesTheCachedDraftAndStepsOnlyPastIt) {
  FakeModel model(word_for_word(2));
  EngineOptions plain_options = argmax_options();
  plain_options.verify_drafts = false;
  TranslationEngine engine(model, argmax_options()), plain(model, plain_options);
  expect_same_updates(engine.update("alpha", " beta"), plain.update("alpha", " beta"));
  EXPECT_EQ(engine.stats().proposed, 0);  // nothing cached yet
  const int verifies = model.verify_decodes;
  // " BETA" is still the model's choice: accepted from the batch, the rest stepped.
  expect_same_updates(engine.update("alpha", " beta gamma delta eta"), plain.update("alpha", " beta gamma delta eta"));
  EXPECT_EQ(model.verify_decodes, verifies + 1);
  EXPECT_EQ(engine.stats().proposed, 1);
  EXPECT_EQ(engine.stats().accepted, 1);
  EXPECT_EQ(engine.stats().generated, plain.stats().generated);
  EXPECT_EQ(engine.stats().stepped, plain.stats().stepped - 1);
  // The ASR rewrote the source: the cached " BETA GAMMA DELTA ETA" is rejected
  // at its first token, its cells dropped, and the draft stepped as before.
  expect_same_updates(engine.update("alpha bat", " gamma delta eta"), plain.update("alpha bat", " gamma delta eta"));
  EXPECT_EQ(engine.stats().proposed, 1 + 4);
  EXPECT_EQ(engine.stats().accepted, 1);
  EXPECT_EQ(engine.stats().stepped, plain.stats().stepped - 1);
  // The final starts from the committed target and the draft: all accepted.
  EXPECT_EQ(engine.committed_text(), "ALPHA BAT");
  EXPECT_EQ(engine.translate("alpha bat gamma delta eta"), plain.translate("alpha bat gamma delta eta"));
  EXPECT_EQ(engine.stats().accepted, 1 + 5);
  EXPECT_EQ(engine.stats().stepped, plain.stats().stepped - 6);
}

TEST(TranslationEngine, ADraftsTokenBudgetFollowsItsSource) {
  // A model that never stops: 100 "x" tokens whatever the source.
  FakeModel model([](const std::vector<std::string>& source) {
    std::vector<ScriptToken> out(100, ScriptToken{" x", {}});
    (void)source;
    return out;
  });
  EngineOptions o = argmax_options();
  o.max_new_tokens = 40;
  o.commit.mode = CommitMode::kMass;
  o.commit.mass_threshold = 2.0;  // nothing commits
  TranslationEngine engine(model, o);
  engine.update("a", "");
  EXPECT_EQ(engine.stats().generated, 2 * 1 + 6);  // draft_tokens_per_source x 1 source token + slack
  engine.update("a b c d", "");
  EXPECT_EQ(engine.stats().generated, 8 + 2 * 4 + 6);
  engine.translate("a b c d");  // finals keep max_new_tokens
  EXPECT_EQ(engine.stats().generated, 8 + 14 + 40);
  o.draft_tokens_per_source = 0;  // fitting off
  TranslationEngine fixed(model, o);
  fixed.update("a", "");
  EXPECT_EQ(fixed.stats().generated, 40);
}

TEST(TranslationEngine, FrontierRoundsDownToTheLastCompleteToken) {
  FakeModel model(word_for_word(2));
  TranslationEngine engine(model, argmax_options());
  engine.update("", "hello world again");
  EXPECT_EQ(engine.frontier_for(""), 0);
  EXPECT_EQ(engine.frontier_for("hello"), 1);
  EXPECT_EQ(engine.frontier_for("hello wor"), 1);  // " world" straddles the end
  EXPECT_EQ(engine.frontier_for("hello world"), 2);
  EXPECT_EQ(engine.frontier_for("goodbye"), -1);  // not the drafted source
}

TEST(TranslationEngine, FrontierFollowsByteSplitCharacters) {
  // Each CJK character is two tokens carrying 2 and 1 of its 3 bytes: the
  // frontier keeps moving through them (the seed's freeze at the first U+FFFD).
  FakeModel model(word_for_word(2));
  model.byte_split_cjk = true;
  TranslationEngine engine(model, argmax_options());
  const std::string ni = "\xE4\xBD\xA0", hao = "\xE5\xA5\xBD", shi = "\xE4\xB8\x96", jie = "\xE7\x95\x8C";
  EngineUpdate u = engine.update(ni + hao, shi + jie);
  EXPECT_EQ(engine.frontier_for(ni + hao), 4);
  EXPECT_EQ(engine.frontier_for(ni + hao + shi), 6);
  // The target echoes the pieces (upper-casing leaves them): whole characters only.
  EXPECT_EQ(u.committed, ni + hao);
  EXPECT_EQ(u.draft, shi + jie);
  u = engine.update(ni + hao + shi, jie);
  EXPECT_FALSE(u.called_model);
  EXPECT_EQ(u.committed, shi);
}

TEST(TranslationEngine, HalfACharacterIsNeverCommitted) {
  // Target token 0 carries 2 bytes of a character and depends on source 0; its
  // last byte (token 1) depends on source 2: nothing commits until it may.
  const std::string ni = "\xE4\xBD\xA0";
  FakeModel model([ni](const std::vector<std::string>& source) {
    const int n = static_cast<int>(source.size());
    return std::vector<ScriptToken>{{ni.substr(0, 2), {peaked(n, 0), peaked(n, 0)}},
                                    {ni.substr(2), {peaked(n, 2), peaked(n, 2)}}};
  });
  TranslationEngine engine(model, argmax_options());
  EngineUpdate u = engine.update("a b", " c");
  EXPECT_EQ(u.committed, "");
  EXPECT_EQ(u.draft, ni);  // drafted whole, committed only once it may
  u = engine.update("a b c", "");
  EXPECT_EQ(u.committed, ni);
}

TEST(TranslationEngine, DropsAStaleTail) {
  FakeModel model(word_for_word(2));
  TranslationEngine engine(model, argmax_options());
  EngineUpdate u = engine.update("one two three", " three");  // already committed: not doubled
  EXPECT_EQ(u.committed, "ONE TWO THREE");
  EXPECT_EQ(u.draft, "");
}

ScriptToken plain(const std::string& piece, int n) { return {piece, {peaked(n, 0), peaked(n, 0)}}; }

TEST(TranslationEngine, ASingleIdPlaceholderStopsGeneration) {
  FakeModel model([](const std::vector<std::string>& s) {
    const int n = static_cast<int>(s.size());
    return std::vector<ScriptToken>{plain("X", n), plain(FakeModel::kPlaceholder, n), plain(" junk", n)};
  });
  model.placeholder = PlaceholderMode::kSingle;
  TranslationEngine engine(model, argmax_options());
  EXPECT_EQ(engine.update("a", "").committed, "X");
  const int before = model.decode_calls;
  EXPECT_EQ(engine.translate("a b"), "X");
  // The prompt with the last draft's "X" verified in its batch: the placeholder
  // predicted after it ended the loop without a step.
  EXPECT_EQ(model.decode_calls - before, 1);
  EXPECT_EQ(model.verify_decodes, 1);

  // Without verification: the prompt, then "X" stepped.
  EngineOptions o = argmax_options();
  o.verify_drafts = false;
  TranslationEngine plain_engine(model, o);
  EXPECT_EQ(plain_engine.update("a", "").committed, "X");
  const int plain_before = model.decode_calls;
  EXPECT_EQ(plain_engine.translate("a b"), "X");
  EXPECT_EQ(model.decode_calls - plain_before, 2);
}

TEST(TranslationEngine, AFragmentedPlaceholderStopsThroughTheRollingWindow) {
  FakeModel model([](const std::vector<std::string>& s) {
    const int n = static_cast<int>(s.size());
    std::vector<ScriptToken> out{plain("X", n)};
    for (const std::string& p : FakeModel::kPlaceholderPieces) out.push_back(plain(p, n));
    out.push_back(plain(" junk", n));
    return out;
  });
  model.placeholder = PlaceholderMode::kFragmented;
  TranslationEngine engine(model, argmax_options());
  const int before = model.decode_calls;
  EXPECT_EQ(engine.translate("a"), "X");
  EXPECT_EQ(model.decode_calls - before, 1 + static_cast<int>(FakeModel::kPlaceholderPieces.size()));
}

TEST(TranslationEngine, PlaceholderTextIsCutAsAFallback) {
  // The vocabulary has no placeholder token and splits its text differently
  // from how the model emits it: only the text reveals it.
  FakeModel model([](const std::vector<std::string>& s) {
    const int n = static_cast<int>(s.size());
    return std::vector<ScriptToken>{plain("X", n), plain("<\xEF\xBD\x9Chy_pl", n), plain("ace\xE2\x96\x81holder", n),
                                    plain(" junk", n)};
  });
  TranslationEngine engine(model, argmax_options());
  EXPECT_EQ(engine.translate("a"), "X");
  EXPECT_EQ(engine.update("a", "").committed, "X");
}

TEST(TranslationEngine, WithoutHeadsItOnlyTranslatesWholeSegments) {
  FakeModel model(word_for_word(2));
  EngineOptions o = argmax_options();
  o.heads.clear();
  TranslationEngine engine(model, o);
  EXPECT_FALSE(engine.simultaneous());
  EngineUpdate u = engine.update("alpha", " beta");
  EXPECT_EQ(u.committed, "");
  EXPECT_EQ(model.decode_calls, 0);
  EXPECT_EQ(engine.translate("alpha beta"), "ALPHA BETA");
}

TEST(TranslationEngine, ResetStartsANewSegment) {
  FakeModel model(word_for_word(2));
  TranslationEngine engine(model, argmax_options());
  engine.update("alpha beta", "");
  engine.reset();
  EXPECT_EQ(engine.committed_text(), "");
  EXPECT_EQ(engine.frontier_for("alpha"), -1);  // the draft cache is gone
  EngineUpdate u = engine.update("gamma", "");
  EXPECT_EQ(u.committed, "GAMMA");
}

TEST(TranslationEngine, APromptBeyondTheContextIsAnError) {
  FakeModel model(word_for_word(2));
  EngineOptions o = argmax_options();
  o.context_tokens = 24;
  TranslationEngine engine(model, o);
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += " w" + std::to_string(i);
  EXPECT_THROW(engine.translate(longer), Error);
}

TEST(TranslationEngine, UnknownHeadsAreRefused) {
  FakeModel model(word_for_word(2));
  EngineOptions o = argmax_options();
  o.heads = {{40, 0}};
  EXPECT_THROW(TranslationEngine(model, o), Error);
}

TEST(TranslationEngine, PromptTemplatesByArchitecture) {
  PromptTemplate hy = prompt_template("hunyuan-dense", "zh", "en");
  EXPECT_TRUE(
      hy.before_source.starts_with("<\xEF\xBD\x9Chy_User\xEF\xBD\x9C>Translate the following segment into English"));
  EXPECT_EQ(hy.after_source, "<\xEF\xBD\x9Chy_Assistant\xEF\xBD\x9C>");
  PromptTemplate q = prompt_template("qwen3", "en", "de");
  EXPECT_TRUE(q.before_source.starts_with("<|im_start|>user\n"));
  EXPECT_NE(q.before_source.find("German"), std::string::npos);
  EXPECT_EQ(q.after_source, "<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace earshot::stages::translation

// The stable/unstable commit layer (WhisperLiveKit #426): text units by Unicode range,
// agreement of K passes with a hold-back of N units, the native stable prefix,
// and finalisation that never shows text twice.
#include <gtest/gtest.h>

#include "common/error.h"
#include "policy/commit/stable_commit.h"
#include "policy/commit/text_units.h"

namespace earshot::policy::commit {
namespace {

std::vector<std::string> keys(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& u : split_text_units(text)) out.push_back(u.key);
  return out;
}

Hypothesis text(std::string t) { return Hypothesis{std::move(t), {}, {}}; }

TEST(TextUnits, SpacedScriptsSplitIntoWordsThatJoinBackToTheText) {
  const auto units = split_text_units("  Hello, world!  again");
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[0].text, "  Hello,");
  EXPECT_EQ(units[1].text, " world!");
  EXPECT_EQ(units[2].text, "  again");
  EXPECT_EQ(units[1].key, "world!");
  EXPECT_EQ(join_units(units, 0, units.size()), "  Hello, world!  again");
}

TEST(TextUnits, CjkAndKanaAreOneUnitPerCharacter) {
  EXPECT_EQ(keys("今天天气很好。"), (std::vector<std::string>{"今", "天", "天", "气", "很", "好", "。"}));
  EXPECT_EQ(keys("ひらがなカタカナ"), (std::vector<std::string>{"ひ", "ら", "が", "な", "カ", "タ", "カ", "ナ"}));
  // Korean is written with spaces: Hangul stays word-level.
  EXPECT_EQ(keys("안녕하세요 세계"), (std::vector<std::string>{"안녕하세요", "세계"}));
}

TEST(TextUnits, MixedScriptsSplitByRangeNotByLanguage) {
  EXPECT_EQ(keys("我用 iPhone 15拍照, ok"),
            (std::vector<std::string>{"我", "用", "iPhone", "15", "拍", "照", ",", "ok"}));
  const auto units = split_text_units("我用 iPhone");
  EXPECT_EQ(units[2].text, " iPhone");
}

TEST(TextUnits, BrokenUtf8StaysInsideItsWord) {
  const std::string cut = "ab\xE4\xBD";  // the first two bytes of a three-byte character
  EXPECT_EQ(keys(cut), (std::vector<std::string>{cut}));
}

TEST(StableCommit, CommitsWhatKPassesAgreeOnLessTheHoldBack) {
  StableCommitter c({.hold_back = 1, .agreeing_passes = 2});
  auto u = c.update(text("one two three"));
  EXPECT_EQ(u.committed, "");  // one pass is no agreement
  EXPECT_EQ(u.provisional, "one two three");
  u = c.update(text("one two four five"));
  EXPECT_EQ(u.committed, "one two");  // the common prefix; the hold-back does not bite here
  EXPECT_EQ(u.provisional, " four five");
  u = c.update(text("one two four five six"));
  EXPECT_EQ(u.committed, " four five");  // "six" is the held-back unit
  EXPECT_EQ(u.provisional, " six");
  EXPECT_EQ(c.committed_text(), "one two four five");
}

TEST(StableCommit, TheHoldBackKeepsTheLastUnitsOfAgreeingPassesProvisional) {
  StableCommitter c({.hold_back = 2, .agreeing_passes = 2});
  c.update(text("a b c d"));
  const auto u = c.update(text("a b c d"));
  EXPECT_EQ(u.committed, "a b");
  EXPECT_EQ(u.provisional, " c d");
}

TEST(StableCommit, ThreeAgreeingPassesNeedThreePasses) {
  StableCommitter c({.hold_back = 0, .agreeing_passes = 3});
  EXPECT_EQ(c.update(text("x y")).committed, "");
  EXPECT_EQ(c.update(text("x y z")).committed, "");
  EXPECT_EQ(c.update(text("x y z")).committed, "x y");
  EXPECT_EQ(c.update(text("x y z")).committed, " z");
}

// Seed regression: the whole CJK text was one whitespace unit, so nothing ever committed.
TEST(StableCommit, CjkCommitsCharacterByCharacterWhileStreaming) {
  StableCommitter c({.hold_back = 2, .agreeing_passes = 2});
  c.update(text("今天天气"));
  auto u = c.update(text("今天天气很好"));
  EXPECT_EQ(u.committed, "今天天气");  // four agreed characters; the two held back are new anyway
  u = c.update(text("今天天气很好我们"));
  EXPECT_EQ(u.committed, "很好");
  EXPECT_EQ(u.provisional, "我们");
}

TEST(StableCommit, MixedScriptTextCommitsAcrossTheScriptBoundary) {
  StableCommitter c({.hold_back = 1, .agreeing_passes = 2});
  c.update(text("我们 use GPU 训练"));
  const auto u = c.update(text("我们 use GPU 训练模型"));
  EXPECT_EQ(u.committed, "我们 use GPU 训练");
  EXPECT_EQ(u.provisional, "模型");  // seen in one pass only
}

TEST(StableCommit, ARevisionOfCommittedTextNeverRetractsOrRepeatsIt) {
  StableCommitter c({.hold_back = 0, .agreeing_passes = 2});
  c.update(text("the cat sat"));
  EXPECT_EQ(c.update(text("the cat sat")).committed, "the cat sat");
  // A re-decode changes a committed word: nothing is committed against a different prefix.
  auto u = c.update(text("the bat sat down"));
  EXPECT_EQ(u.committed, "");
  EXPECT_EQ(u.provisional, " down");
  EXPECT_EQ(c.revisions(), 1u);
  u = c.update(text("the bat sat down"));
  EXPECT_EQ(u.committed, "");
  // Passes consistent with the committed text again commit after K of them.
  c.update(text("the cat sat down now"));
  u = c.update(text("the cat sat down now"));
  EXPECT_EQ(u.committed, " down now");
  EXPECT_EQ(c.committed_text(), "the cat sat down now");
}

TEST(StableCommit, TheNativeStablePrefixWinsOverPassAgreement) {
  StableCommitter c({.hold_back = 2, .agreeing_passes = 3});
  // One pass, no agreement possible, but the backend says its first words are stable.
  auto u = c.update(Hypothesis{"hello wonderful world", {}, std::string("hello wond")});
  EXPECT_EQ(u.committed, "hello");  // a word the native prefix cuts stays provisional
  u = c.update(Hypothesis{"hello wonderful world today", {}, std::string("hello wonderful world")});
  EXPECT_EQ(u.committed, " wonderful world");  // no hold-back on the backend's own claim
  EXPECT_EQ(u.provisional, " today");
  // Works on CJK without any whitespace.
  StableCommitter zh;
  EXPECT_EQ(zh.update(Hypothesis{"你好世界", {}, std::string("你好")}).committed, "你好");
}

TEST(StableCommit, TokenLevelUnitsCommitTokenPieces) {
  StableCommitter c({.hold_back = 1, .agreeing_passes = 2, .units = UnitKind::kToken});
  c.update(Hypothesis{"Hello world", {"Hel", "lo", " world"}, {}});
  const auto u = c.update(Hypothesis{"Hello worlds", {"Hel", "lo", " world", "s"}, {}});
  EXPECT_EQ(u.committed, "Hello world");  // three agreed pieces; "s" is held back
  EXPECT_EQ(u.provisional, "s");          // a word units would have kept whole
  EXPECT_EQ(c.committed_units(), 3u);
}

TEST(StableCommit, ATokenCutInsideACharacterWaitsForTheRest) {
  StableCommitter c({.hold_back = 0, .agreeing_passes = 1, .units = UnitKind::kToken});
  // "好" is E5 A5 BD; byte-level BPE may split it across two pieces.
  const auto u = c.update(Hypothesis{"你好", {"你", "\xE5\xA5", "\xBD"}, {}});
  EXPECT_EQ(u.committed, "你好");
  const auto v = StableCommitter({.hold_back = 0, .agreeing_passes = 1, .units = UnitKind::kToken})
                     .update(Hypothesis{"你\xE5\xA5", {"你", "\xE5\xA5"}, {}});
  EXPECT_EQ(v.committed, "你");
}

// Seed regression: finalisation emitted the whole re-decoded text, repeating the committed prefix.
TEST(StableCommit, FinalisationEmitsOnlyTheUncommittedSuffix) {
  StableCommitter c({.hold_back = 1, .agreeing_passes = 2});
  c.update(text("alpha beta gamma"));
  EXPECT_EQ(c.update(text("alpha beta gamma")).committed, "alpha beta");
  const FinalUpdate f = c.finalize(text("alpha beta gamma delta"));
  EXPECT_FALSE(f.corrected);
  EXPECT_EQ(f.append, " gamma delta");
  EXPECT_EQ("alpha beta" + f.append, "alpha beta gamma delta");
  EXPECT_EQ(f.text, "alpha beta gamma delta");
  EXPECT_EQ(c.committed_text(), "");  // a new segment starts
}

TEST(StableCommit, FinalisationWithoutStreamingCommitsEmitsEverything) {
  StableCommitter c;
  c.update(text("only once"));
  const FinalUpdate f = c.finalize(text("only once"));
  EXPECT_EQ(f.append, "only once");
  EXPECT_FALSE(f.corrected);
}

TEST(StableCommit, FinalisationThatCorrectsThePrefixSaysSo) {
  StableCommitter c({.hold_back = 0, .agreeing_passes = 1});
  EXPECT_EQ(c.update(text("their going")).committed, "their going");
  const FinalUpdate f = c.finalize(text("they're going home"));
  EXPECT_TRUE(f.corrected);
  EXPECT_EQ(f.text, "they're going home");  // the corrected segment, for a line that can be replaced
  EXPECT_EQ(f.append, " home");             // append-only consumers: past the committed units, nothing twice
}

TEST(StableCommit, CjkFinalFlushEmitsTheRemainingCharacters) {
  StableCommitter c({.hold_back = 2, .agreeing_passes = 2});
  c.update(text("今天天气很好"));
  EXPECT_EQ(c.update(text("今天天气很好")).committed, "今天天气");
  EXPECT_EQ(c.finalize(text("今天天气很好。")).append, "很好。");
}

TEST(StableCommit, ZeroAgreeingPassesIsRejected) {
  EXPECT_THROW(StableCommitter({.hold_back = 0, .agreeing_passes = 0}), Error);
}

}  // namespace
}  // namespace earshot::policy::commit

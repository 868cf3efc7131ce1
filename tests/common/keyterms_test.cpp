#include "common/keyterms.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace earshot {
namespace {

TEST(Keyterms, AddTrimsAndKeepsOneOfEachTerm) {
  Keyterms k;
  k.add("  earshot ");
  k.add("");
  k.add("EarShot", 2.5);
  k.add("ggml");
  ASSERT_EQ(k.terms.size(), 2u);
  EXPECT_EQ(k.terms[0].text, "earshot");
  EXPECT_EQ(k.terms[0].weight, 2.5);
  EXPECT_EQ(k.terms[1].text, "ggml");
}

TEST(Keyterms, MergeAddsTheSessionsToTheDefaults) {
  Keyterms defaults;
  defaults.add("earshot");
  defaults.prompt = "A meeting.";
  Keyterms session;
  session.add("Parakeet");
  session.add("earshot", 3);
  session.prompt = "About models.";
  const Keyterms merged = Keyterms::merge(defaults, session);
  ASSERT_EQ(merged.terms.size(), 2u);
  EXPECT_EQ(merged.terms[0].weight, 3);
  EXPECT_EQ(merged.terms[1].text, "Parakeet");
  EXPECT_EQ(merged.prompt, "A meeting. About models.");
  EXPECT_EQ(Keyterms::merge({}, {}), Keyterms{});
}

TEST(Keyterms, PromptTextListsTheBoostedTermsAfterThePrompt) {
  Keyterms k;
  EXPECT_EQ(k.prompt_text(), "");
  k.add("earshot");
  k.add("umm", -4);  // suppressed: never suggested
  k.add("Qwen3-ASR", 2);
  EXPECT_EQ(k.prompt_text(), "earshot, Qwen3-ASR");
  k.prompt = " Technical talk.";  // as given (Whisper's static prompt keeps its tokens)
  EXPECT_EQ(k.prompt_text(), " Technical talk. earshot, Qwen3-ASR");
  k.terms.clear();
  EXPECT_EQ(k.prompt_text(), " Technical talk.");
}

TEST(Keyterms, PhrasesAreTheTermsAndThePromptsShortItems) {
  Keyterms k;
  k.add("earshot", 2);
  k.prompt = "Parakeet, NeMo toolkit; earshot\nthis sentence is far too long to be a phrase worth boosting.";
  const std::vector<Keyterm> phrases = k.phrases();
  ASSERT_EQ(phrases.size(), 3u);
  EXPECT_EQ(phrases[0].text, "earshot");
  EXPECT_EQ(phrases[0].weight, 2);
  EXPECT_EQ(phrases[1].text, "Parakeet");
  EXPECT_EQ(phrases[2].text, "NeMo toolkit");
}

TEST(Keyterms, KeywordsCarryIntensifiers) {
  EXPECT_EQ(parse_keyword("snuffleupagus:5").text, "snuffleupagus");
  EXPECT_EQ(parse_keyword("snuffleupagus:5").weight, 5);
  EXPECT_EQ(parse_keyword("um:-10").weight, -10);
  EXPECT_EQ(parse_keyword("plain").weight, 1);
  EXPECT_EQ(parse_keyword("Area:51x").text, "Area:51x");  // not a number: part of the word
  EXPECT_THROW(parse_keyword(":3"), Error);
}

TEST(Keyterms, ListFilesSkipCommentsAndReadWeights) {
  const Keyterms k = parse_keyterms_list("# names\nearshot\n\n  Nemotron streaming:2.5 \nearshot:3\n", "terms.txt");
  ASSERT_EQ(k.terms.size(), 2u);
  EXPECT_EQ(k.terms[0].text, "earshot");
  EXPECT_EQ(k.terms[0].weight, 3);
  EXPECT_EQ(k.terms[1].text, "Nemotron streaming");
  EXPECT_EQ(k.terms[1].weight, 2.5);
  try {
    parse_keyterms_list("ok\n:2\n", "terms.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("terms.txt line 2"), std::string::npos) << e.what();
  }
}

TEST(Keyterms, LimitsNameTheOption) {
  Keyterms k;
  for (size_t i = 0; i <= Keyterms::kMaxTerms; ++i) k.add("term" + std::to_string(i));
  try {
    k.check_limits("keyterm");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'keyterm'"), std::string::npos) << e.what();
  }
  Keyterms p;
  p.prompt.assign(Keyterms::kMaxPromptBytes + 1, 'a');
  EXPECT_THROW(p.check_limits("prompt"), Error);
}

}  // namespace
}  // namespace earshot

#include "bench/normalizer.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace earshot::bench {
namespace {

std::string en(const char* s) { return normalize_text(s, NormalizerKind::kEnglish); }
std::string basic(const char* s) { return normalize_text(s, NormalizerKind::kBasic); }

TEST(EnglishNormalizer, CaseWhitespaceAndPunctuation) {
  EXPECT_EQ(en("  Hello,   World!  "), "hello world");
  EXPECT_EQ(en("\"Well\" -- she said; (laughs) yes... [music] <unk> no?"), "well she said yes no");
  EXPECT_EQ(en("rock-and-roll"), "rock and roll");
  EXPECT_EQ(en(""), "");
  EXPECT_EQ(en("?!."), "");
}

TEST(EnglishNormalizer, Fillers) { EXPECT_EQ(en("Um, I think, uh, hmm yes mhm"), "i think yes"); }

TEST(EnglishNormalizer, ContractionsAndTitles) {
  EXPECT_EQ(en("I won't, can't and don't"), "i will not can not and do not");
  EXPECT_EQ(en("Let's go, y'all; we're here, it's fine, I'd say I'll see, they've gone, I'm ok"),
            "let us go you all we are here it is fine i would say i will see they have gone i am ok");
  EXPECT_EQ(en("I\u2019m sure you\u2019re right"), "i am sure you are right");  // curly apostrophes
  EXPECT_EQ(en("don 't"), "do not");
  EXPECT_EQ(en("'quoted' words"), "quoted words");
  EXPECT_EQ(en("Mr. John Dashwood and Mrs. Smith met Dr. Who at St. Paul's"),
            "mister john dashwood and missus smith met doctor who at saint paul is");
  EXPECT_EQ(en("gonna wanna gotta"), "going to want to got to");
  EXPECT_EQ(en("five o'clock"), "5 o clock");
}

TEST(EnglishNormalizer, NumbersToDigits) {
  EXPECT_EQ(en("twenty one"), "21");
  EXPECT_EQ(en("one hundred and five apples"), "105 apples");
  EXPECT_EQ(en("two thousand and twenty"), "2020");
  EXPECT_EQ(en("three million four hundred thousand"), "3400000");
  EXPECT_EQ(en("nineteen hundred"), "1900");
  EXPECT_EQ(en("the twenty first century"), "the 21st century");
  EXPECT_EQ(en("first second third eleventh twelfth"), "1st 2nd 3rd 11th 12th");
  EXPECT_EQ(en("one two three"), "1 2 3");
  EXPECT_EQ(en("twenty thirty"), "20 30");
  EXPECT_EQ(en("zero one"), "0 1");
  EXPECT_EQ(en("rock and roll"), "rock and roll");
  EXPECT_EQ(en("five and six"), "5 and 6");  // "and" joins only after hundred/thousand
  EXPECT_EQ(en("1,000 people paid 3.50 or 5%"), "1000 people paid 3.50 or 5%");
  EXPECT_EQ(en("It cost 21 dollars"), en("it cost twenty-one dollars"));
}

TEST(EnglishNormalizer, SpellingVariantsAndDiacritics) {
  EXPECT_EQ(en("The colour of the theatre centre; I realised"), "the color of the theater center i realized");
  EXPECT_EQ(en("grey programme travelled"), "gray program traveled");
  EXPECT_EQ(en("Café naïve Über façade"), "cafe naive uber facade");
}

TEST(EnglishNormalizer, NonLatinScriptsSurvive) {
  EXPECT_EQ(en("Привет, МИР!"), "привет мир");
  EXPECT_EQ(en("今天天气很好。"), "今天天气很好");
  EXPECT_EQ(en("ΚΑΛΗΜΕΡΑ"), "καλημερα");
}

TEST(BasicNormalizer, KeepsDiacriticsAndNumbersAsWritten) {
  EXPECT_EQ(basic("Ça va? Très bien, merci! (rires)"), "ça va très bien merci");
  EXPECT_EQ(basic("「東京」に、行きました。"), "東京 に 行きました");
  EXPECT_EQ(basic("Twenty-one DON'T"), "twenty one don t");
  EXPECT_EQ(normalize_text("  A   b\tC ", NormalizerKind::kNone), "A b C");
}

TEST(Normalizer, SplitWordsAndCharacters) {
  EXPECT_EQ(split_words(" a  bb \tc "), (std::vector<std::string>{"a", "bb", "c"}));
  EXPECT_EQ(split_characters("ab 今天"), (std::vector<std::string>{"a", "b", "今", "天"}));
  EXPECT_EQ(utf8_encode(utf8_decode("héllo 😀")), "héllo 😀");
  EXPECT_EQ(utf8_decode("\xff"), std::u32string(1, U'\uFFFD'));
}

TEST(Normalizer, Kinds) {
  EXPECT_EQ(parse_normalizer_kind("english"), NormalizerKind::kEnglish);
  EXPECT_EQ(parse_normalizer_kind("basic"), NormalizerKind::kBasic);
  EXPECT_THROW(parse_normalizer_kind("klingon"), Error);
}

}  // namespace
}  // namespace earshot::bench

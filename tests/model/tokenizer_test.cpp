// Whisper tokenizer against the real vocabularies. Expected ids were read from
// the rank files (line `base64(bytes) rank`), with the BPE merges traced by
// hand: the merge path is noted next to each case that needs one.
#include "model/whisper/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::whisper {
namespace {

using ::testing::ElementsAre;
using Tokens = std::vector<int32_t>;

const std::string kModels = std::string(EARSHOT_SHARED_DIR) + "/models/";

const Tokenizer& gpt2() {
  static const Tokenizer tokenizer = Tokenizer::from_tiktoken(kModels + "whisper-gpt2.tiktoken", 51864);
  return tokenizer;
}

const Tokenizer& multilingual() {
  static const Tokenizer tokenizer = Tokenizer::from_tiktoken(kModels + "whisper-multilingual.tiktoken", 51865);
  return tokenizer;
}

const Tokenizer& large_v3() {
  static const Tokenizer tokenizer = Tokenizer::from_tiktoken(kModels + "whisper-multilingual.tiktoken", 51866);
  return tokenizer;
}

std::vector<std::string> word_texts(const std::vector<Tokenizer::Word>& words) {
  std::vector<std::string> texts;
  for (const auto& w : words) texts.push_back(w.text);
  return texts;
}

TEST(Tokenizer, SpecialTokenLayoutEnglishOnly) {
  const SpecialTokens& s = gpt2().special();
  EXPECT_FALSE(gpt2().is_multilingual());
  EXPECT_EQ(s.eot, 50256);
  EXPECT_EQ(s.sot, 50257);
  EXPECT_EQ(s.first_language, 50258);
  EXPECT_EQ(s.n_languages, 99);
  EXPECT_EQ(s.translate, 50357);
  EXPECT_EQ(s.transcribe, 50358);
  EXPECT_EQ(s.sot_lm, 50359);
  EXPECT_EQ(s.sot_prev, 50360);
  EXPECT_EQ(s.no_speech, 50361);
  EXPECT_EQ(s.no_timestamps, 50362);
  EXPECT_EQ(s.timestamp_begin, 50363);
  EXPECT_EQ(s.timestamp_begin + 1501, gpt2().n_vocab());
}

TEST(Tokenizer, SpecialTokenLayoutMultilingual) {
  const SpecialTokens& s = multilingual().special();
  EXPECT_TRUE(multilingual().is_multilingual());
  EXPECT_EQ(s.eot, 50257);
  EXPECT_EQ(s.sot, 50258);
  EXPECT_EQ(s.first_language, 50259);
  EXPECT_EQ(s.n_languages, 99);
  EXPECT_EQ(s.translate, 50358);
  EXPECT_EQ(s.transcribe, 50359);
  EXPECT_EQ(s.sot_lm, 50360);
  EXPECT_EQ(s.sot_prev, 50361);
  EXPECT_EQ(s.no_speech, 50362);
  EXPECT_EQ(s.no_timestamps, 50363);
  EXPECT_EQ(s.timestamp_begin, 50364);
  EXPECT_EQ(s.timestamp_begin + 1501, multilingual().n_vocab());
}

TEST(Tokenizer, SpecialTokenLayoutLargeV3) {
  const SpecialTokens& s = large_v3().special();
  EXPECT_EQ(s.eot, 50257);
  EXPECT_EQ(s.sot, 50258);
  EXPECT_EQ(s.first_language, 50259);
  EXPECT_EQ(s.n_languages, 100);
  EXPECT_EQ(s.translate, 50359);
  EXPECT_EQ(s.transcribe, 50360);
  EXPECT_EQ(s.sot_lm, 50361);
  EXPECT_EQ(s.sot_prev, 50362);
  EXPECT_EQ(s.no_speech, 50363);
  EXPECT_EQ(s.no_timestamps, 50364);
  EXPECT_EQ(s.timestamp_begin, 50365);
  EXPECT_EQ(s.timestamp_begin + 1501, large_v3().n_vocab());
}

TEST(Tokenizer, RejectsUnknownLayoutsAndShortVocabularies) {
  EXPECT_THROW(Tokenizer::from_tiktoken(kModels + "whisper-gpt2.tiktoken", 51863), Error);
  // The English vocabulary has 50256 text tokens; a multilingual layout needs 50257.
  try {
    Tokenizer::from_tiktoken(kModels + "whisper-gpt2.tiktoken", 51865);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("50256"));
  }
}

TEST(Tokenizer, TiktokenFileErrorsNameTheProblem) {
  const auto dir = std::filesystem::temp_directory_path() / "earshot_tokenizer_test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  try {
    Tokenizer::from_tiktoken(dir / "missing.tiktoken", 51864);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
  try {
    Tokenizer::from_tiktoken(write("bad.tiktoken", "IQ== 0\nnot*base64 1\n"), 51864);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("bad.tiktoken:2"));
  }
  try {
    Tokenizer::from_tiktoken(write("gap.tiktoken", "IQ== 0\nIg== 2\n"), 51864);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 1 is missing"));
  }
  std::filesystem::remove_all(dir);
}

TEST(Tokenizer, LanguagesInWhisperOrder) {
  const auto langs = languages();
  ASSERT_EQ(langs.size(), 100u);
  const std::vector<std::string> first = {"en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl"};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(langs[i].code, first[i]);
  EXPECT_EQ(langs[0].name, "english");
  EXPECT_EQ(langs[30].code, "th");
  EXPECT_EQ(langs[80].name, "haitian creole");
  EXPECT_EQ(langs[93].code, "haw");
  EXPECT_EQ(langs[98].code, "su");
  EXPECT_EQ(langs[99].code, "yue");
  EXPECT_EQ(langs[99].name, "cantonese");
}

TEST(Tokenizer, LanguageTokens) {
  EXPECT_EQ(multilingual().language_token("en"), 50259);
  EXPECT_EQ(multilingual().language_token("ja"), 50266);
  EXPECT_EQ(multilingual().language_token("su"), 50357);
  EXPECT_EQ(multilingual().language_token("yue"), std::nullopt);  // only large-v3 has it
  EXPECT_EQ(large_v3().language_token("yue"), 50358);
  EXPECT_EQ(multilingual().language_token("xx"), std::nullopt);
  EXPECT_EQ(gpt2().language_token("en"), std::nullopt);
  EXPECT_EQ(multilingual().language_code_of_token(50259), "en");
  EXPECT_EQ(large_v3().language_code_of_token(50358), "yue");
  EXPECT_EQ(multilingual().language_code_of_token(50358), "");  // translate
  EXPECT_EQ(multilingual().language_code_of_token(7), "ja");    // a language index
}

TEST(Tokenizer, SotSequence) {
  EXPECT_THAT(gpt2().sot_sequence("en", Task::kTranscribe), ElementsAre(50257));
  EXPECT_THAT(multilingual().sot_sequence("en", Task::kTranscribe), ElementsAre(50258, 50259, 50359));
  EXPECT_THAT(multilingual().sot_sequence("de", Task::kTranslate), ElementsAre(50258, 50261, 50358));
  EXPECT_THAT(multilingual().sot_sequence("", Task::kTranscribe), ElementsAre(50258, 50359));
  EXPECT_THAT(large_v3().sot_sequence("ja", Task::kTranscribe), ElementsAre(50258, 50266, 50360));
  EXPECT_THROW(multilingual().sot_sequence("klingon", Task::kTranscribe), Error);
}

TEST(Tokenizer, SpecialTokenNames) {
  const Tokenizer& t = multilingual();
  EXPECT_EQ(t.token_to_string(50257), "<|endoftext|>");
  EXPECT_EQ(t.token_to_string(50258), "<|startoftranscript|>");
  EXPECT_EQ(t.token_to_string(50259), "<|en|>");
  EXPECT_EQ(t.token_to_string(50357), "<|su|>");
  EXPECT_EQ(t.token_to_string(50358), "<|translate|>");
  EXPECT_EQ(t.token_to_string(50359), "<|transcribe|>");
  EXPECT_EQ(t.token_to_string(50360), "<|startoflm|>");
  EXPECT_EQ(t.token_to_string(50361), "<|startofprev|>");
  EXPECT_EQ(t.token_to_string(50362), "<|nospeech|>");
  EXPECT_EQ(t.token_to_string(50363), "<|notimestamps|>");
  EXPECT_EQ(t.token_to_string(50364), "<|0.00|>");
  EXPECT_EQ(t.token_to_string(50364 + 60), "<|1.20|>");
  EXPECT_EQ(t.token_to_string(51864), "<|30.00|>");
  EXPECT_EQ(t.token_to_string(2425), " Hello");  // text tokens are their bytes
  EXPECT_EQ(gpt2().token_to_string(50256), "<|endoftext|>");
  EXPECT_EQ(gpt2().token_to_string(50363), "<|0.00|>");
  EXPECT_EQ(large_v3().token_to_string(50358), "<|yue|>");
  EXPECT_EQ(large_v3().token_to_string(50365), "<|0.00|>");
  EXPECT_THROW(t.token_to_string(51865), Error);
  EXPECT_THROW(t.token_to_string(-1), Error);
}

TEST(Tokenizer, EncodesWholeWordsFromTheRankFile) {
  // " Hello" is rank 18435 and " world" rank 995 in the GPT-2 file; "Hello" 15496, "!" 0.
  EXPECT_THAT(gpt2().encode(" Hello world!"), ElementsAre(18435, 995, 0));
  EXPECT_THAT(gpt2().encode("Hello world"), ElementsAre(15496, 995));
  EXPECT_THAT(multilingual().encode("Hello world"), ElementsAre(15947, 1002));
  EXPECT_THAT(multilingual().encode(" Hello"), ElementsAre(2425));
  // jfk: "Ask" 25214, " not" 407, " what" 644, " your" 534, " country" 1499, " can" 460, " do" 466, " for" 329, " you"
  // 345.
  EXPECT_THAT(gpt2().encode("Ask not what your country can do for you"),
              ElementsAre(25214, 407, 644, 534, 1499, 460, 466, 329, 345));
  EXPECT_THAT(gpt2().encode(" unbelievably"), ElementsAre(48943));
  EXPECT_THAT(gpt2().encode(" café"), ElementsAre(40304));
  EXPECT_THAT(multilingual().encode(" café"), ElementsAre(25118));
  EXPECT_THAT(multilingual().encode("你好"), ElementsAre(26410));
  EXPECT_THAT(gpt2().encode(" ..."), ElementsAre(2644));
  EXPECT_TRUE(gpt2().encode("").empty());
}

TEST(Tokenizer, ContractionsAndPunctuationSplitLikeGpt2) {
  // "I" 40, "'m" 1101, " here" 994, "'s" 338, " it" 340.
  EXPECT_THAT(gpt2().encode("I'm here's it's"), ElementsAre(40, 1101, 994, 338, 340, 338));
  // "x" 87, " =" 796, " 3" 513, "." 13, "14" 1415, ";" 26 — digits never join letters or punctuation.
  EXPECT_THAT(gpt2().encode("x = 3.14;"), ElementsAre(87, 796, 513, 13, 1415, 26));
  EXPECT_THAT(multilingual().encode("x = 3.14;"), ElementsAre(87, 6585, 805, 13, 7271, 26));
}

TEST(Tokenizer, WhitespaceRuns) {
  // "a" 64, " " 220, " b" 275: the last space of a run joins the next word.
  EXPECT_THAT(gpt2().encode("a  b"), ElementsAre(64, 220, 275));
  // "\n" 198 before a letter stays alone (only U+0020 prefixes words), so a
  // double newline inside text is two tokens, but "\n\n" (628) at the end.
  EXPECT_THAT(gpt2().encode("a\n\nb"), ElementsAre(64, 198, 198, 65));
  EXPECT_THAT(gpt2().encode("a\n\n"), ElementsAre(64, 628));
  // " " 220, " x" 2124, "\t" 197 twice, "y" 88, then " \n" at the end as one
  // piece with no merge for the pair: 220, 198.
  EXPECT_THAT(gpt2().encode("  x\t\ty \n"), ElementsAre(220, 2124, 197, 197, 88, 220, 198));
}

TEST(Tokenizer, BytePairMergesByRank) {
  // "tokenization": merges o+n 261, a+t 265, e+n 268, i+on 295, at+ion 341,
  // o+k 482, i+z 528, iz+ation 1634, ok+en 4233, t+oken 30001.
  EXPECT_THAT(gpt2().encode("tokenization"), ElementsAre(30001, 1634));
  // " 12345": " "+1 352, " 1"+2 1105, 4+5 2231, " 12"+3 17031; no " 12345".
  EXPECT_THAT(gpt2().encode(" 12345"), ElementsAre(17031, 2231));
  // "2024": 2+0 1238, 2+4 1731 (no "2024" token); "年" = e5 b9 b4: e5+b9 33176, then byte b4 = 112.
  EXPECT_THAT(gpt2().encode("2024年"), ElementsAre(1238, 1731, 33176, 112));
  EXPECT_THAT(multilingual().encode("2024年"), ElementsAre(2009, 7911, 5157));
  // " Schrödinger": i+n 259, e+r 260, in+g 278, " "+S 318, c+h 339, c3+b6 973,
  // " S"+ch 2065, d+ing 3584, " Sch"+r 46191 -> " Schr" ö ding er; " Kat"+ze.
  EXPECT_THAT(multilingual().encode(" Schrödinger's Katze"), ElementsAre(46191, 973, 3584, 260, 311, 8365, 1381));
  // Cyrillic: "Пр" 43971 + "ивет" 31259, " мир" 20536.
  EXPECT_THAT(multilingual().encode("Привет мир"), ElementsAre(43971, 31259, 20536));
  // Emoji: f0+9f 8582, f09f+98 47249, then byte 80 = 222; " done" 1760.
  EXPECT_THAT(gpt2().encode("😀 done"), ElementsAre(47249, 222, 1760));
  EXPECT_THAT(multilingual().encode("😀 done"), ElementsAre(13125, 222, 1096));
  // Fullwidth comma (U+FF0C, punctuation) has no merges: bytes ef bc 8c = 171 120 234.
  EXPECT_THAT(multilingual().encode("你好，世界。"), ElementsAre(26410, 171, 120, 234, 24486, 1543));
}

TEST(Tokenizer, LongPiecesMergeLikeShortOnes) {
  // "aa" is rank 7252, "aaa" 46071, "aaaa" 24794, no longer run of a's: a+a
  // merges everywhere first (leftmost on ties), then aa+aa. One 100000-byte
  // piece must not take quadratic time.
  EXPECT_EQ(gpt2().encode(std::string(100000, 'a')), Tokens(25000, 24794));
  EXPECT_THAT(gpt2().encode("aaaaaa"), ElementsAre(24794, 7252));
  const std::string cjk = [] {
    std::string text;
    for (int i = 0; i < 5000; ++i) text += "你好世界";
    return text;
  }();
  EXPECT_EQ(multilingual().decode(multilingual().encode(cjk)), cjk);
}

TEST(Tokenizer, RoundTrips) {
  const std::vector<std::string> texts = {
      "And so my fellow Americans, ask not what your country can do for you.",
      " Ça va? Très bien, merci — naïve façade, Ångström, Øresund.",
      "日本語のテキストと中文文本，还有한국어.",
      "Emoji: 👍🏽 😀🎉 and flags 🇫🇷!",
      "Digits 0123456789 3.14159 1,000,000 ٣٤٥ ⅷ",
      "tabs\tand   multiple    spaces   ",
      "lines\n\nwith\r\nbreaks\n",
      "  leading and trailing  \n\n",
      "'s 're 've 'm 'll 'd 'X don't",
      "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم",
      std::string("invalid \xff\xfe bytes \xc3 alone"),
  };
  for (const Tokenizer* t : {&gpt2(), &multilingual()}) {
    for (const std::string& text : texts) {
      const Tokens tokens = t->encode(text);
      EXPECT_EQ(t->decode(tokens), text);
      for (int32_t id : tokens) EXPECT_FALSE(t->is_special(id));
    }
  }
}

TEST(Tokenizer, DecodeSkipsSpecialTokens) {
  const Tokenizer& t = multilingual();
  EXPECT_EQ(t.decode(Tokens{50258, 50259, 50359, 50363, 2425, 1002, 50257}), " Hello world");
  EXPECT_EQ(t.token_bytes(50258), "");
  EXPECT_THROW(t.decode(Tokens{51865}), Error);
}

TEST(Tokenizer, RepairsByteTokensStoredAsReplacementCharacters) {
  // Converted ggml vocabularies store non-UTF-8 tokens as U+FFFD; bytes 0xc3 (id
  // 127) and 0xa9 (id 102) follow from GPT-2's byte order.
  std::vector<std::string> bytes;
  for (int32_t id = 0; id < 50256; ++id) bytes.push_back(gpt2().token_bytes(id));
  bytes[127] = "\xEF\xBF\xBD";
  bytes[102] = "\xEF\xBF\xBD";
  bytes.push_back("<|endoftext|>");  // ggml files append it; the layout owns that id
  const Tokenizer t(std::move(bytes), 51864);
  EXPECT_EQ(t.token_bytes(127), "\xc3");
  EXPECT_EQ(t.token_bytes(102), "\xa9");
  EXPECT_EQ(t.token_to_string(50256), "<|endoftext|>");
  EXPECT_THAT(t.encode(" café"), ElementsAre(40304));
}

TEST(Tokenizer, SplitsSpaceDelimitedWords) {
  // " Hello" " world" "!": punctuation starts a word of its own.
  const auto words = gpt2().split_to_words(Tokens{18435, 995, 0}, "en");
  EXPECT_THAT(word_texts(words), ElementsAre(" Hello", " world", "!"));
  EXPECT_THAT(words[1].tokens, ElementsAre(995));
  // Sub-word tokens without a leading space join the previous word; "'s" is
  // not a punctuation string, so it joins too.
  const auto schr = multilingual().split_to_words(Tokens{46191, 973, 3584, 260, 311, 8365, 1381}, "de");
  EXPECT_THAT(word_texts(schr), ElementsAre(" Schrödinger's", " Katze"));
  EXPECT_THAT(schr[0].tokens, ElementsAre(46191, 973, 3584, 260, 311));
  // A first token without a space still starts the first word.
  EXPECT_THAT(word_texts(gpt2().split_to_words(Tokens{30001, 1634, 13}, "en")), ElementsAre("tokenization", "."));
  // Whitespace-only units count as punctuation (Python: "" in string.punctuation).
  EXPECT_THAT(word_texts(gpt2().split_to_words(Tokens{64, 198, 65}, "en")), ElementsAre("a", "\nb"));
}

TEST(Tokenizer, KeepsACharacterSplitAcrossTokensTogether) {
  // " caf" 19945 + byte c3 (127) + byte a9 (102): "é" completes only with the
  // third token, and the unit continues the word.
  const auto words = gpt2().split_to_words(Tokens{19945, 127, 102}, "fr");
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].text, " café");
  EXPECT_THAT(words[0].tokens, ElementsAre(19945, 127, 102));
  // Emoji f0 9f 98 (47249) + 80 (222), then " done".
  EXPECT_THAT(word_texts(gpt2().split_to_words(Tokens{47249, 222, 1760}, "en")), ElementsAre("😀", " done"));
}

TEST(Tokenizer, SplitsCjkIntoCharacterUnits) {
  const auto words = multilingual().split_to_words(Tokens{26410, 171, 120, 234, 24486, 1543}, "zh");
  EXPECT_THAT(word_texts(words), ElementsAre("你好", "，", "世界", "。"));
  EXPECT_THAT(words[1].tokens, ElementsAre(171, 120, 234));
  // "年" split as e5b9 + b4 is one unit in Japanese too.
  const auto ja = gpt2().split_to_words(Tokens{1238, 1731, 33176, 112}, "ja");
  EXPECT_THAT(word_texts(ja), ElementsAre("20", "24", "年"));
  // An incomplete character at the end stays one unit; a stray continuation
  // byte that never completes is a unit of its own.
  const auto tail = multilingual().split_to_words(Tokens{26410, 171, 120}, "zh");
  EXPECT_THAT(word_texts(tail), ElementsAre("你好", "\xef\xbc"));
  EXPECT_THAT(tail[1].tokens, ElementsAre(171, 120));
  EXPECT_THAT(word_texts(multilingual().split_to_words(Tokens{120, 26410}, "yue")), ElementsAre("\xbc", "你好"));
}

TEST(Tokenizer, SpecialTokensAreWordsOfTheirOwn) {
  const Tokenizer& t = multilingual();
  const auto words = t.split_to_words(Tokens{50258, 50259, 50359, 50363, 2425, 1002, 50364 + 50, 50257}, "en");
  EXPECT_THAT(word_texts(words), ElementsAre("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>",
                                             " Hello", " world", "<|1.00|>", "<|endoftext|>"));
  // A special token in the middle of a CJK character closes the partial unit.
  EXPECT_THAT(word_texts(t.split_to_words(Tokens{171, 50257, 120}, "zh")),
              ElementsAre("\xef", "<|endoftext|>", "\xbc"));
}

}  // namespace
}  // namespace earshot::whisper

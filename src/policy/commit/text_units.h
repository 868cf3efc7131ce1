// Text units the commit layer compares hypotheses in: whitespace-separated words
// for spaced scripts, one unit per character for scripts written without spaces
// (CJK ideographs, kana, CJK and full-width punctuation). Chosen by Unicode range,
// never by a language switch, so mixed-script text splits right without knowing
// the language. Hangul stays word-level: Korean separates words with spaces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::policy::commit {

struct TextUnit {
  std::string text;  // as it appears, leading whitespace included: joining units gives the text back
  std::string key;   // what passes are compared by: the text without its leading whitespace
};

// Whether `code` is a character of a script written without spaces (one unit each).
bool is_unspaced_script(uint32_t code);

// Splits UTF-8 text into units. Leading whitespace belongs to the unit after it;
// trailing whitespace is dropped (it carries no text). Bytes that are not valid
// UTF-8 stay inside the surrounding word.
std::vector<TextUnit> split_text_units(std::string_view text);

// Units from a decoder's token pieces (the token-level variant): one unit per piece.
std::vector<TextUnit> token_units(const std::vector<std::string>& pieces);

std::string join_units(const std::vector<TextUnit>& units, size_t begin, size_t end);

}  // namespace earshot::policy::commit

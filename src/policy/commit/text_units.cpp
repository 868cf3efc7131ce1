#include "policy/commit/text_units.h"

#include "common/utf8.h"

namespace earshot::policy::commit {
namespace {

// Decodes the code point at s[i]; returns its length in bytes (1 for a byte that
// does not start a well-formed sequence, which then decodes as 0xFFFD).
size_t decode(std::string_view s, size_t i, uint32_t& code) {
  char32_t cp = 0;
  const size_t n = utf8_sequence_length(s, i, &cp);
  code = n == 0 ? 0xFFFD : static_cast<uint32_t>(cp);
  return n == 0 ? 1 : n;
}

bool is_space(uint32_t code) {
  return code == ' ' || code == '\t' || code == '\n' || code == '\r' || code == '\v' || code == '\f' ||
         code == 0x3000;  // the ideographic space separates too
}

}  // namespace

bool is_unspaced_script(uint32_t c) {
  return (c >= 0x3001 && c <= 0x303F) ||  // CJK symbols and punctuation (not U+3000, a space)
         (c >= 0x3040 && c <= 0x30FF) ||  // hiragana, katakana
         (c >= 0x31F0 && c <= 0x31FF) ||  // katakana phonetic extensions
         (c >= 0x3400 && c <= 0x4DBF) ||  // CJK extension A
         (c >= 0x4E00 && c <= 0x9FFF) ||  // CJK unified ideographs
         (c >= 0xF900 && c <= 0xFAFF) ||  // CJK compatibility ideographs
         (c >= 0xFF01 && c <= 0xFF9F) ||  // full-width forms, half-width katakana
         (c >= 0x20000 && c <= 0x3134F);  // CJK extensions B to G
}

std::vector<TextUnit> split_text_units(std::string_view text) {
  std::vector<TextUnit> units;
  std::string pending_space;  // whitespace waiting for the unit it precedes
  TextUnit word;              // the spaced-script word being built
  auto close_word = [&] {
    if (!word.key.empty()) units.push_back(std::move(word));
    word = {};
  };
  for (size_t i = 0; i < text.size();) {
    uint32_t code = 0;
    const size_t n = decode(text, i, code);
    const std::string_view bytes = text.substr(i, n);
    i += n;
    if (is_space(code)) {
      close_word();
      pending_space += bytes;
    } else if (is_unspaced_script(code)) {
      close_word();
      units.push_back({pending_space + std::string(bytes), std::string(bytes)});
      pending_space.clear();
    } else {
      if (word.key.empty()) {
        word.text = pending_space;
        pending_space.clear();
      }
      word.text += bytes;
      word.key += bytes;
    }
  }
  close_word();
  return units;
}

std::vector<TextUnit> token_units(const std::vector<std::string>& pieces) {
  std::vector<TextUnit> units;
  units.reserve(pieces.size());
  for (const std::string& p : pieces) units.push_back({p, p});
  return units;
}

std::string join_units(const std::vector<TextUnit>& units, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end && i < units.size(); ++i) out += units[i].text;
  return out;
}

}  // namespace earshot::policy::commit

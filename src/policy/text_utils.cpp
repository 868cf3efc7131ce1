#include "policy/text_utils.h"

#include <cctype>
#include <cstdint>

namespace earshot::policy {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    // U+FFFD is what decoders put for broken bytes: treat it as incomplete too.
    if (code == 0xFFFD) return false;
    i += extra + 1;
  }
  return true;
}

std::string normalize_word(std::string_view word) {
  size_t begin = 0, end = word.size();
  auto strip = [](unsigned char c) { return std::isspace(c) || std::ispunct(c); };
  while (begin < end && strip(static_cast<unsigned char>(word[begin]))) ++begin;
  while (end > begin && strip(static_cast<unsigned char>(word[end - 1]))) --end;
  std::string out(word.substr(begin, end - begin));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<size_t> find_repetition(const std::vector<std::string>& words, size_t fresh_from) {
  const size_t n_words = words.size();
  for (size_t start = 0; start < n_words; ++start) {
    for (size_t n = 1; start + 2 * n <= n_words; ++n) {
      size_t repeats = 1;
      while (start + (repeats + 1) * n <= n_words) {
        bool same = true;
        for (size_t k = 0; k < n && same; ++k) same = words[start + k] == words[start + repeats * n + k];
        if (!same) break;
        ++repeats;
      }
      const bool loop = n == 1 ? repeats >= 8 : (repeats >= 3 && n * repeats >= 12);
      if (loop && start + repeats * n > fresh_from) return start + n;
    }
  }
  return std::nullopt;
}

}  // namespace earshot::policy

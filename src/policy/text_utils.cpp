#include "policy/text_utils.h"

#include <cctype>
#include <cstdint>

#include "common/utf8.h"

namespace earshot::policy {

bool is_valid_utf8(std::string_view s) {
  // U+FFFD is what decoders put for broken bytes: treat it as incomplete too.
  return earshot::is_valid_utf8(s) && s.find("\xEF\xBF\xBD") == std::string_view::npos;
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

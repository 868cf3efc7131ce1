#include "common/text.h"

#include <charconv>

namespace earshot {

std::string trim(std::string_view text, std::string_view whitespace) {
  const size_t a = text.find_first_not_of(whitespace);
  if (a == std::string_view::npos) return "";
  const size_t b = text.find_last_not_of(whitespace);
  return std::string(text.substr(a, b - a + 1));
}

std::optional<int> parse_whole_number(std::string_view text, int min, int max) {
  int n = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc() || ptr != end || n < min || n > max) return std::nullopt;
  return n;
}

std::string join_list(const std::vector<std::string>& items, std::string_view last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? last : std::string_view(", ");
    out += items[i];
  }
  return out;
}

}  // namespace earshot

#include "common/text.h"

namespace earshot {

std::string trim(std::string_view text, std::string_view whitespace) {
  const size_t a = text.find_first_not_of(whitespace);
  if (a == std::string_view::npos) return "";
  const size_t b = text.find_last_not_of(whitespace);
  return std::string(text.substr(a, b - a + 1));
}

}  // namespace earshot

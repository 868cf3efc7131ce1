// Small text helpers every part uses.
#pragma once

#include <string>
#include <string_view>

namespace earshot {

// `text` without the leading and trailing characters of `whitespace`.
std::string trim(std::string_view text, std::string_view whitespace = " \t\r\n");

}  // namespace earshot

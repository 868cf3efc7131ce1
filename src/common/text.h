// Small text helpers every part uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace earshot {

// `text` without the leading and trailing characters of `whitespace`.
std::string trim(std::string_view text, std::string_view whitespace = " \t\r\n");

// `text` as a whole decimal number in [min, max]; nullopt for anything else
// (a sign other than '-', spaces, a fraction, digits past the range).
std::optional<int> parse_whole_number(std::string_view text, int min, int max);

}  // namespace earshot

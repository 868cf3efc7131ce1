// Small text helpers every part uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace earshot {

// `text` without the leading and trailing characters of `whitespace`.
std::string trim(std::string_view text, std::string_view whitespace = " \t\r\n");

// `text` as a whole decimal number in [min, max]; nullopt for anything else
// (a sign other than '-', spaces, a fraction, digits past the range).
std::optional<int> parse_whole_number(std::string_view text, int min, int max);

// The items as a list a message reads: "a, b" then `last` before the final one
// ("a, b or c" with the default); "" for none.
std::string join_list(const std::vector<std::string>& items, std::string_view last = " or ");

}  // namespace earshot

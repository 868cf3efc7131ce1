// Small text helpers shared by the policies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::policy {

// Whether the bytes are complete, well-formed UTF-8 (a word cut inside a
// multi-byte character is not).
bool is_valid_utf8(std::string_view bytes);

// Lower-case ASCII, surrounding spaces and punctuation removed: the form words are compared in.
std::string normalize_word(std::string_view word);

// Repetition loops: a word repeated >= 8 times in a row, or an n-gram (n >= 2)
// repeated >= 3 times in a row covering >= 12 words. Returns the index where the
// first such run's second repetition starts (keep words before it), or nullopt.
// Only runs reaching past index `fresh_from` count (older words were already judged).
std::optional<size_t> find_repetition(const std::vector<std::string>& words, size_t fresh_from = 0);

}  // namespace earshot::policy

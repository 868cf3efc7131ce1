// Writing JSON by hand where a streaming writer is simpler than building a
// document (reports, per-emission event lines).
#pragma once

#include <optional>
#include <string>

namespace earshot {

// `text` as a JSON string literal, quotes included. Control characters are
// escaped; other bytes pass through unchanged (UTF-8 stays as is).
std::string json_quote(const std::string& text);

// `v` with 6 significant digits; null when it is not finite (JSON has no inf or nan).
std::string json_number(double v);
// The same for a value that may be absent: null without one.
std::string json_number(const std::optional<double>& v);

}  // namespace earshot

// UTF-8 checks for text that came from a client or a file and goes into JSON:
// nlohmann::json::dump() throws on invalid UTF-8, so such text is made valid
// before it is quoted in a message.
#pragma once

#include <string>
#include <string_view>

namespace earshot {

// True for well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every byte that does not start a well-formed sequence replaced by
// U+FFFD (valid text is returned unchanged).
std::string to_valid_utf8(std::string_view text);

}  // namespace earshot

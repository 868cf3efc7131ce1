// UTF-8 checks for text that came from a client or a file and goes into JSON:
// nlohmann::json::dump() throws on invalid UTF-8, so such text is made valid
// before it is quoted in a message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace earshot {

// Length of the well-formed UTF-8 sequence at text[pos] (RFC 3629), 0 when none
// starts there (a stray continuation byte, an overlong form, a surrogate, a cut
// sequence); *code_point gets its value when given and the length is not 0.
size_t utf8_sequence_length(std::string_view text, size_t pos, char32_t* code_point = nullptr);

// True for well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every byte that does not start a well-formed sequence replaced by
// U+FFFD (valid text is returned unchanged).
std::string to_valid_utf8(std::string_view text);

// to_valid_utf8(text) cut to at most `max_bytes` at a character boundary (a
// WebSocket close reason, say: 123 bytes at most, and valid UTF-8).
std::string valid_utf8_prefix(std::string_view text, size_t max_bytes);

// What a client sent, as an error message quotes it: in single quotes, printable
// and short. Control characters (C0, DEL, C1) and bytes that are not well-formed
// UTF-8 are written as \xNN (C1 as \u0080..\u009F), a backslash as \\, so a
// NUL no longer cuts the message where it is read through what() and a newline
// or a terminal escape does not reach a log raw. At most `max_bytes` of the text
// are quoted (cut at a character boundary); a longer one ends in "..." and says
// its length: 'KeepAliveKeepAlive...' (1048576 bytes).
inline constexpr size_t kMaxQuotedBytes = 64;
std::string quote_client_text(std::string_view text, size_t max_bytes = kMaxQuotedBytes);

}  // namespace earshot

#include "common/utf8.h"

#include <algorithm>
#include <cstdint>

namespace earshot {

size_t utf8_sequence_length(std::string_view text, size_t i, char32_t* code_point) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) {
    if (code_point) *code_point = c;
    return 1;
  }
  size_t n = 0;
  uint32_t cp = 0;
  if ((c >> 5) == 0x6) {
    n = 2, cp = c & 0x1F;
  } else if ((c >> 4) == 0xE) {
    n = 3, cp = c & 0x0F;
  } else if ((c >> 3) == 0x1E) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (text.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(text[i + k]);
    if ((cc >> 6) != 0x2) return 0;
    cp = cp << 6 | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (code_point) *code_point = cp;
  return n;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

std::string valid_utf8_prefix(std::string_view text, size_t max_bytes) {
  std::string out = to_valid_utf8(text);
  if (out.size() <= max_bytes) return out;
  size_t end = max_bytes;
  // Back off over continuation bytes (10xxxxxx) to the start of the character cut in two.
  while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xC0) == 0x80) --end;
  out.resize(end);
  return out;
}

std::string quote_client_text(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "'";
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp = 0;
    const size_t n = utf8_sequence_length(text, i, &cp);
    if (i + std::max<size_t>(n, 1) > max_bytes) break;
    if (n == 0 || cp < 0x20 || cp == 0x7F) {
      const auto byte = static_cast<unsigned char>(text[i]);
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
      i += 1;
    } else if (cp >= 0x80 && cp <= 0x9F) {
      out += "\\u00";
      out += kHex[cp >> 4];
      out += kHex[cp & 0xF];
      i += n;
    } else if (cp == '\\') {
      out += "\\\\";
      i += 1;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  out += '\'';
  if (i < text.size()) {
    out.insert(out.size() - 1, "...");
    out += " (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace earshot

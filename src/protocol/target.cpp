#include "protocol/target.h"

namespace earshot::protocol {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string url_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

Target parse_target(std::string_view target) {
  Target t;
  size_t q = target.find('?');
  t.path = url_decode(target.substr(0, q));
  if (q == std::string_view::npos) return t;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = url_decode(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
    t.pairs.emplace_back(key, value);
    t.query[key] = value;  // the last occurrence wins, as in Starlette
  }
  return t;
}

std::vector<std::string> Target::all(const std::string& key) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : pairs)
    if (k == key) out.push_back(v);
  return out;
}

}  // namespace earshot::protocol

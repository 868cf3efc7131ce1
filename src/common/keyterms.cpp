#include "common/keyterms.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/error.h"
#include "common/text.h"

namespace earshot {

namespace {

bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

size_t count_words(std::string_view text) {
  size_t words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    const bool space = std::isspace(c) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// "text:weight" when the part after the last ':' is a number; else the whole text, weight 1
// (a colon in a name, "Area:51x", stays in it).
void split_weight(std::string_view value, std::string& text, double& weight) {
  const size_t colon = value.rfind(':');
  text = trim(value);
  weight = 1.0;
  if (colon == std::string_view::npos) return;
  const std::string number = trim(value.substr(colon + 1));
  if (number.empty()) return;
  char* end = nullptr;
  const double w = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(w)) return;
  text = trim(value.substr(0, colon));
  weight = w;
}

}  // namespace

bool Keyterms::operator==(const Keyterms& other) const {
  return prompt == other.prompt &&
         std::equal(terms.begin(), terms.end(), other.terms.begin(), other.terms.end(),
                    [](const Keyterm& a, const Keyterm& b) { return a.text == b.text && a.weight == b.weight; });
}

void Keyterms::add(std::string_view text, double weight) {
  const std::string t = trim(text);
  if (t.empty()) return;
  for (Keyterm& k : terms)
    if (same_text(k.text, t)) {
      k.weight = weight;
      return;
    }
  terms.push_back({t, weight});
}

Keyterms Keyterms::merge(const Keyterms& defaults, const Keyterms& session) {
  Keyterms out = defaults;
  for (const Keyterm& k : session.terms) out.add(k.text, k.weight);
  if (!session.prompt.empty()) out.prompt = out.prompt.empty() ? session.prompt : out.prompt + " " + session.prompt;
  return out;
}

std::string Keyterms::prompt_text() const {
  std::string list;
  for (const Keyterm& k : terms) {
    if (k.weight <= 0) continue;  // suppressed: a prompt can only suggest words
    if (!list.empty()) list += ", ";
    list += k.text;
  }
  if (prompt.empty()) return list;
  if (list.empty()) return prompt;
  return prompt + (std::isspace(static_cast<unsigned char>(prompt.back())) ? "" : " ") + list;
}

std::vector<Keyterm> Keyterms::phrases() const {
  std::vector<Keyterm> out = terms;
  size_t start = 0;
  for (size_t i = 0; i <= prompt.size(); ++i) {
    if (i < prompt.size() && prompt[i] != ',' && prompt[i] != ';' && prompt[i] != '\n') continue;
    const std::string item = trim(std::string_view(prompt).substr(start, i - start), " \t\r\n.");
    start = i + 1;
    if (item.empty() || count_words(item) > kMaxPhraseWords) continue;
    if (std::none_of(out.begin(), out.end(), [&](const Keyterm& k) { return same_text(k.text, item); }))
      out.push_back({item, 1.0});
  }
  return out;
}

void Keyterms::check_limits(const std::string& option) const {
  if (terms.size() > kMaxTerms)
    throw Error(ErrorCode::kInvalidArgument, "invalid option '" + option + "': " + std::to_string(terms.size()) +
                                                 " terms, at most " + std::to_string(kMaxTerms));
  for (const Keyterm& k : terms)
    if (k.text.size() > kMaxTermBytes)
      throw Error(ErrorCode::kInvalidArgument, "invalid option '" + option + "': a term of " +
                                                   std::to_string(k.text.size()) + " bytes, at most " +
                                                   std::to_string(kMaxTermBytes));
  if (prompt.size() > kMaxPromptBytes)
    throw Error(ErrorCode::kInvalidArgument, "invalid option '" + option + "': a prompt of " +
                                                 std::to_string(prompt.size()) + " bytes, at most " +
                                                 std::to_string(kMaxPromptBytes));
}

Keyterm parse_keyword(std::string_view value) {
  Keyterm k;
  split_weight(value, k.text, k.weight);
  if (k.text.empty())
    throw Error(
        ErrorCode::kInvalidArgument,
        "invalid option 'keywords': expected word or word:intensifier (a number), got '" + std::string(value) + "'");
  return k;
}

Keyterms parse_keyterms_list(std::string_view text, const std::string& source) {
  Keyterms out;
  size_t line_number = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    std::string term;
    double weight = 1.0;
    split_weight(line, term, weight);
    if (term.empty())
      throw Error(ErrorCode::kInvalidArgument, source + " line " + std::to_string(line_number) +
                                                   ": expected a term or term:weight (a number), got '" + line + "'");
    out.add(term, weight);
    if (end == text.size()) break;
  }
  return out;
}

}  // namespace earshot

#include "bench/normalizer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/error.h"

namespace earshot::bench {
namespace {

char32_t to_lower(char32_t c) {
  if (c >= U'A' && c <= U'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;  // Latin-1 capitals
  if (c >= 0x100 && c <= 0x17F) {                            // Latin Extended-A: mostly even/odd pairs
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x178) return 0xFF;
    if (c == 0x130) return U'i';
    return (c % 2 == 0 && c != 0x138 && c != 0x149) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;  // Greek
  if (c >= 0x410 && c <= 0x42F) return c + 32;                // Cyrillic
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_space(char32_t c) {
  return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || c == U'\v' || c == U'\f' || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_zero_width(char32_t c) { return (c >= 0x200B && c <= 0x200D) || c == 0x2060 || c == 0xFEFF; }
bool is_combining_mark(char32_t c) { return (c >= 0x300 && c <= 0x36F) || (c >= 0x1AB0 && c <= 0x1AFF); }
bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// Punctuation and symbols (Unicode categories P* and S*) of the blocks that
// matter for ASR output; letters, digits and marks of any script are kept.
bool is_punct_or_symbol(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  if (c >= 0xA1 && c <= 0xBF)
    return !(c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA || (c >= 0xBC && c <= 0xBE));
  if (c == 0xD7 || c == 0xF7) return true;
  if (c >= 0x2010 && c <= 0x205E) return true;  // general punctuation (dashes, quotes, ellipsis)
  if (c >= 0x20A0 && c <= 0x20CF) return true;  // currency
  if (c >= 0x2190 && c <= 0x2BFF) return true;  // arrows, maths, technical, shapes, dingbats
  if (c >= 0x3001 && c <= 0x303F)
    return !((c >= 0x3005 && c <= 0x3007) || (c >= 0x3021 && c <= 0x3029) || (c >= 0x3031 && c <= 0x3035) ||
             c == 0x303B || c == 0x303C);
  if ((c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
      (c >= 0xFF5B && c <= 0xFF65))
    return true;  // fullwidth punctuation
  if (c >= 0xFE30 && c <= 0xFE6F) return true;
  if (c >= 0x1F000 && c <= 0x1FAFF) return true;  // emoji and pictographs
  return false;
}

// Latin letters with diacritics -> base letters (English mode only).
const char* strip_diacritic(char32_t c) {
  static const std::unordered_map<char32_t, const char*> table = [] {
    std::unordered_map<char32_t, const char*> t;
    const char32_t* groups[] = {U"aàáâãäåāăą",  U"cçćĉċč",     U"dď",   U"eèéêëēĕėęě", U"gĝğġģ",
                                U"hĥ",          U"iìíîïĩīĭį",  U"jĵ",   U"kķ",         U"lĺļľ",
                                U"nñńņň",       U"oòóôõöōŏőø", U"rŕŗř", U"sśŝşš",      U"tţť",
                                U"uùúûüũūŭůűų", U"wŵ",         U"yýÿŷ", U"zźżž"};
    static const char* bases[] = {"a", "c", "d", "e", "g", "h", "i", "j", "k", "l",
                                  "n", "o", "r", "s", "t", "u", "w", "y", "z"};
    for (size_t g = 0; g < std::size(groups); ++g)
      for (const char32_t* p = groups[g] + 1; *p; ++p) t[*p] = bases[g];
    t[U'ß'] = "ss";
    t[U'æ'] = "ae";
    t[U'œ'] = "oe";
    t[U'ð'] = "d";
    t[U'þ'] = "th";
    t[U'ł'] = "l";
    t[U'đ'] = "d";
    return t;
  }();
  auto it = table.find(c);
  return it == table.end() ? nullptr : it->second;
}

// Removes [..], <..> and (..) spans, like Whisper's normalisers.
std::u32string remove_bracketed(const std::u32string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t open = s[i];
    char32_t close = open == U'[' ? U']' : open == U'<' ? U'>' : open == U'(' ? U')' : 0;
    if (close) {
      size_t j = s.find(close, i + 1);
      if (j != std::u32string::npos) {
        out += U' ';
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::vector<std::u32string> split_u32(const std::u32string& s) {
  std::vector<std::u32string> words;
  std::u32string cur;
  for (char32_t c : s) {
    if (is_space(c)) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

// Step 4 of kEnglish: punctuation to spaces, keeping word-internal apostrophes
// and number punctuation.
std::u32string english_punctuation(const std::u32string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t c = s[i];
    const char32_t prev = i > 0 ? s[i - 1] : U' ';
    const char32_t next = i + 1 < s.size() ? s[i + 1] : U' ';
    if (c == U'\'') {
      out += c;  // word-level rules decide later
    } else if ((c == U'.' || c == U',') && is_digit(prev) && is_digit(next)) {
      if (c == U'.') out += c;  // "1,000" -> "1000"
    } else if (c == U'%' && is_digit(prev)) {
      out += c;
    } else if (is_punct_or_symbol(c)) {
      out += U' ';
    } else {
      out += c;
    }
  }
  return out;
}

const std::unordered_map<std::string, std::string>& word_replacements() {
  static const std::unordered_map<std::string, std::string> m = {{"won't", "will not"},
                                                                 {"can't", "can not"},
                                                                 {"let's", "let us"},
                                                                 {"ain't", "aint"},
                                                                 {"y'all", "you all"},
                                                                 {"wanna", "want to"},
                                                                 {"gotta", "got to"},
                                                                 {"gonna", "going to"},
                                                                 {"i'ma", "i am going to"},
                                                                 {"imma", "i am going to"},
                                                                 {"woulda", "would have"},
                                                                 {"coulda", "could have"},
                                                                 {"shoulda", "should have"},
                                                                 {"ma'am", "madam"},
                                                                 // titles (the trailing period was already removed)
                                                                 {"mr", "mister"},
                                                                 {"mrs", "missus"},
                                                                 {"st", "saint"},
                                                                 {"dr", "doctor"},
                                                                 {"prof", "professor"},
                                                                 {"capt", "captain"},
                                                                 {"gov", "governor"},
                                                                 {"ald", "alderman"},
                                                                 {"gen", "general"},
                                                                 {"sen", "senator"},
                                                                 {"rep", "representative"},
                                                                 {"pres", "president"},
                                                                 {"rev", "reverend"},
                                                                 {"hon", "honorable"},
                                                                 {"asst", "assistant"},
                                                                 {"assoc", "associate"},
                                                                 {"lt", "lieutenant"},
                                                                 {"col", "colonel"},
                                                                 {"jr", "junior"},
                                                                 {"sr", "senior"},
                                                                 {"esq", "esquire"}};
  return m;
}

const std::unordered_map<std::string, std::string>& british_to_american() {
  static const std::unordered_map<std::string, std::string> m = {{"colour", "color"},
                                                                 {"colours", "colors"},
                                                                 {"coloured", "colored"},
                                                                 {"favour", "favor"},
                                                                 {"favours", "favors"},
                                                                 {"favourite", "favorite"},
                                                                 {"favourites", "favorites"},
                                                                 {"honour", "honor"},
                                                                 {"honours", "honors"},
                                                                 {"honoured", "honored"},
                                                                 {"honourable", "honorable"},
                                                                 {"labour", "labor"},
                                                                 {"neighbour", "neighbor"},
                                                                 {"neighbours", "neighbors"},
                                                                 {"neighbourhood", "neighborhood"},
                                                                 {"behaviour", "behavior"},
                                                                 {"humour", "humor"},
                                                                 {"rumour", "rumor"},
                                                                 {"harbour", "harbor"},
                                                                 {"flavour", "flavor"},
                                                                 {"endeavour", "endeavor"},
                                                                 {"vigour", "vigor"},
                                                                 {"armour", "armor"},
                                                                 {"parlour", "parlor"},
                                                                 {"odour", "odor"},
                                                                 {"splendour", "splendor"},
                                                                 {"ardour", "ardor"},
                                                                 {"centre", "center"},
                                                                 {"centres", "centers"},
                                                                 {"theatre", "theater"},
                                                                 {"metre", "meter"},
                                                                 {"metres", "meters"},
                                                                 {"litre", "liter"},
                                                                 {"fibre", "fiber"},
                                                                 {"sombre", "somber"},
                                                                 {"realise", "realize"},
                                                                 {"realised", "realized"},
                                                                 {"realising", "realizing"},
                                                                 {"recognise", "recognize"},
                                                                 {"recognised", "recognized"},
                                                                 {"organise", "organize"},
                                                                 {"organised", "organized"},
                                                                 {"organisation", "organization"},
                                                                 {"apologise", "apologize"},
                                                                 {"apologised", "apologized"},
                                                                 {"criticise", "criticize"},
                                                                 {"emphasise", "emphasize"},
                                                                 {"summarise", "summarize"},
                                                                 {"civilisation", "civilization"},
                                                                 {"analyse", "analyze"},
                                                                 {"analysed", "analyzed"},
                                                                 {"paralyse", "paralyze"},
                                                                 {"travelled", "traveled"},
                                                                 {"travelling", "traveling"},
                                                                 {"traveller", "traveler"},
                                                                 {"cancelled", "canceled"},
                                                                 {"cancelling", "canceling"},
                                                                 {"labelled", "labeled"},
                                                                 {"modelling", "modeling"},
                                                                 {"jewellery", "jewelry"},
                                                                 {"quarrelled", "quarreled"},
                                                                 {"defence", "defense"},
                                                                 {"offence", "offense"},
                                                                 {"pretence", "pretense"},
                                                                 {"licence", "license"},
                                                                 {"grey", "gray"},
                                                                 {"programme", "program"},
                                                                 {"programmes", "programs"},
                                                                 {"catalogue", "catalog"},
                                                                 {"dialogue", "dialog"},
                                                                 {"analogue", "analog"},
                                                                 {"judgement", "judgment"},
                                                                 {"ageing", "aging"},
                                                                 {"acknowledgement", "acknowledgment"},
                                                                 {"plough", "plow"},
                                                                 {"cheque", "check"},
                                                                 {"tyre", "tire"},
                                                                 {"kerb", "curb"},
                                                                 {"aluminium", "aluminum"},
                                                                 {"mould", "mold"},
                                                                 {"moult", "molt"},
                                                                 {"sceptic", "skeptic"},
                                                                 {"sceptical", "skeptical"},
                                                                 {"manoeuvre", "maneuver"},
                                                                 {"practise", "practice"},
                                                                 {"enquiry", "inquiry"},
                                                                 {"enquire", "inquire"},
                                                                 {"whilst", "while"},
                                                                 {"amongst", "among"},
                                                                 {"towards", "toward"},
                                                                 {"learnt", "learned"},
                                                                 {"spelt", "spelled"},
                                                                 {"dreamt", "dreamed"},
                                                                 {"connexion", "connection"},
                                                                 {"gaol", "jail"}};
  return m;
}

bool is_filler(const std::string& w) {
  return w == "hmm" || w == "mm" || w == "mhm" || w == "mmm" || w == "uh" || w == "um";
}

// Step 7: contraction suffixes (Whisper's order: n't before 't).
std::string expand_contraction(const std::string& w) {
  struct Suffix {
    const char* suffix;
    const char* expansion;
  };
  static const Suffix suffixes[] = {{"n't", " not"},  {"'re", " are"}, {"'s", " is"},    {"'d", " would"},
                                    {"'ll", " will"}, {"'t", " not"},  {"'ve", " have"}, {"'m", " am"}};
  for (const Suffix& s : suffixes) {
    const std::string suffix = s.suffix;
    if (w.size() > suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0)
      return w.substr(0, w.size() - suffix.size()) + s.expansion;
  }
  return w;
}

// ---- numbers (step 8) ----
struct NumberWord {
  long value;
  enum Kind { kZero, kOnes, kTeen, kTens, kHundred, kScale } kind;
  bool ordinal;
};

std::optional<NumberWord> number_word(const std::string& w) {
  static const std::unordered_map<std::string, NumberWord> m = [] {
    std::unordered_map<std::string, NumberWord> t;
    const char* ones[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    const char* ones_ord[] = {"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"};
    for (int i = 0; i < 9; ++i) {
      t[ones[i]] = {i + 1, NumberWord::kOnes, false};
      t[ones_ord[i]] = {i + 1, NumberWord::kOnes, true};
    }
    const char* teens[] = {"ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                           "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
    const char* teens_ord[] = {"tenth",     "eleventh",  "twelfth",     "thirteenth", "fourteenth",
                               "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth"};
    for (int i = 0; i < 10; ++i) {
      t[teens[i]] = {i + 10, NumberWord::kTeen, false};
      t[teens_ord[i]] = {i + 10, NumberWord::kTeen, true};
    }
    const char* tens[] = {"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
    const char* tens_ord[] = {"twentieth", "thirtieth",  "fortieth",  "fiftieth",
                              "sixtieth",  "seventieth", "eightieth", "ninetieth"};
    for (int i = 0; i < 8; ++i) {
      t[tens[i]] = {(i + 2) * 10, NumberWord::kTens, false};
      t[tens_ord[i]] = {(i + 2) * 10, NumberWord::kTens, true};
    }
    t["zero"] = {0, NumberWord::kZero, false};
    t["hundred"] = {100, NumberWord::kHundred, false};
    t["hundredth"] = {100, NumberWord::kHundred, true};
    t["thousand"] = {1000, NumberWord::kScale, false};
    t["thousandth"] = {1000, NumberWord::kScale, true};
    t["million"] = {1000000, NumberWord::kScale, false};
    t["millionth"] = {1000000, NumberWord::kScale, true};
    t["billion"] = {1000000000, NumberWord::kScale, false};
    t["billionth"] = {1000000000, NumberWord::kScale, true};
    return t;
  }();
  auto it = m.find(w);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string ordinal_suffix(long v) {
  const long last_two = v % 100;
  if (last_two >= 11 && last_two <= 13) return "th";
  switch (v % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
  }
}

class NumberBuilder {
 public:
  // Tries to extend the number with `w`; false means `w` must start a new one.
  bool accepts(const NumberWord& w) const {
    if (!started_) return true;
    if (ordinal_) return false;
    switch (w.kind) {
      case NumberWord::kZero: return false;
      case NumberWord::kOnes:
        return last_ == Last::kHundred || last_ == Last::kScale || (last_ == Last::kTens && current_ % 10 == 0);
      case NumberWord::kTeen:
      case NumberWord::kTens: return (last_ == Last::kHundred || last_ == Last::kScale) && current_ % 100 == 0;
      case NumberWord::kHundred: return current_ > 0 && current_ < 100 && last_ != Last::kScale;
      case NumberWord::kScale:
        return (current_ > 0) && (last_scale_ == 0 || w.value < last_scale_) && last_ != Last::kScale;
    }
    return false;
  }
  void add(const NumberWord& w) {
    started_ = true;
    ordinal_ = w.ordinal;
    switch (w.kind) {
      case NumberWord::kZero:
      case NumberWord::kOnes:
      case NumberWord::kTeen:
      case NumberWord::kTens:
        current_ += w.value;
        last_ = w.kind == NumberWord::kTens ? Last::kTens : Last::kOnes;
        break;
      case NumberWord::kHundred:
        current_ = (current_ == 0 ? 1 : current_) * 100;
        last_ = Last::kHundred;
        break;
      case NumberWord::kScale:
        total_ += (current_ == 0 ? 1 : current_) * w.value;
        current_ = 0;
        last_scale_ = w.value;
        last_ = Last::kScale;
        break;
    }
  }
  bool started() const { return started_; }
  bool wants_and() const { return started_ && !ordinal_ && (last_ == Last::kHundred || last_ == Last::kScale); }
  std::string take() {
    const long v = total_ + current_;
    std::string out = std::to_string(v) + (ordinal_ ? ordinal_suffix(v) : "");
    *this = NumberBuilder();
    return out;
  }

 private:
  enum class Last { kNone, kOnes, kTens, kHundred, kScale };
  bool started_ = false;
  bool ordinal_ = false;
  long total_ = 0;
  long current_ = 0;
  long last_scale_ = 0;
  Last last_ = Last::kNone;
};

std::vector<std::string> numbers_to_digits(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  NumberBuilder number;
  for (size_t i = 0; i < words.size(); ++i) {
    std::optional<NumberWord> nw = number_word(words[i]);
    if (!nw && words[i] == "and" && number.wants_and() && i + 1 < words.size()) {
      std::optional<NumberWord> next = number_word(words[i + 1]);
      if (next &&
          (next->kind == NumberWord::kOnes || next->kind == NumberWord::kTeen || next->kind == NumberWord::kTens))
        continue;  // "one hundred and five"
    }
    if (!nw) {
      if (number.started()) out.push_back(number.take());
      out.push_back(words[i]);
      continue;
    }
    if (!number.accepts(*nw)) out.push_back(number.take());
    number.add(*nw);
    if (nw->kind == NumberWord::kZero) out.push_back(number.take());
  }
  if (number.started()) out.push_back(number.take());
  return out;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (w.empty()) continue;
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

std::string normalize_english(const std::u32string& input) {
  std::u32string s;
  for (char32_t c : input) {
    if (is_zero_width(c)) continue;
    if (c == 0x2018 || c == 0x2019 || c == 0x02BC) c = U'\'';
    s += to_lower(c);
  }
  s = remove_bracketed(s);
  s = english_punctuation(s);
  // Word-level rules operate on UTF-8 words.
  std::vector<std::string> words;
  for (std::u32string& w32 : split_u32(s)) {
    // "don 't" -> "don't": an apostrophe-led fragment joins the previous word.
    std::string w = utf8_encode(w32);
    if (w.size() > 1 && w[0] == '\'' && w[1] != '\'' && !words.empty() && words.back().back() != '\'') {
      words.back() += w;
      continue;
    }
    words.push_back(std::move(w));
  }
  std::vector<std::string> expanded;
  for (std::string w : words) {
    while (!w.empty() && w.front() == '\'') w.erase(w.begin());  // quotes, not apostrophes
    while (!w.empty() && w.back() == '\'') w.pop_back();
    if (w.empty() || is_filler(w)) continue;
    auto rep = word_replacements().find(w);
    std::string text = rep != word_replacements().end() ? rep->second : expand_contraction(w);
    for (char& c : text)
      if (c == '\'') c = ' ';
    for (std::u32string& part : split_u32(utf8_decode(text))) expanded.push_back(utf8_encode(part));
  }
  std::vector<std::string> numbered = numbers_to_digits(expanded);
  std::vector<std::string> final_words;
  for (std::string& w : numbered) {
    auto am = british_to_american().find(w);
    if (am != british_to_american().end()) w = am->second;
    std::string plain;
    for (char32_t c : utf8_decode(w)) {
      if (is_combining_mark(c)) continue;
      const char* base = strip_diacritic(c);
      plain += base ? std::string(base) : utf8_encode(std::u32string(1, c));
    }
    final_words.push_back(std::move(plain));
  }
  return join(final_words);
}

std::string normalize_basic(const std::u32string& input) {
  std::u32string s;
  for (char32_t c : input) {
    if (is_zero_width(c)) continue;
    s += to_lower(c);
  }
  s = remove_bracketed(s);
  for (char32_t& c : s)
    if (is_punct_or_symbol(c)) c = U' ';
  std::vector<std::string> words;
  for (const std::u32string& w : split_u32(s)) words.push_back(utf8_encode(w));
  return join(words);
}

}  // namespace

NormalizerKind parse_normalizer_kind(std::string_view name) {
  if (name == "english") return NormalizerKind::kEnglish;
  if (name == "basic") return NormalizerKind::kBasic;
  if (name == "none") return NormalizerKind::kNone;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown normaliser '" + std::string(name) + "' (expected english, basic or none)");
}

const char* to_string(NormalizerKind kind) {
  switch (kind) {
    case NormalizerKind::kEnglish: return "english";
    case NormalizerKind::kBasic: return "basic";
    case NormalizerKind::kNone: return "none";
  }
  return "?";
}

std::string normalize_text(std::string_view text, NormalizerKind kind) {
  const std::u32string s = utf8_decode(text);
  switch (kind) {
    case NormalizerKind::kEnglish: return normalize_english(s);
    case NormalizerKind::kBasic: return normalize_basic(s);
    case NormalizerKind::kNone: break;
  }
  std::vector<std::string> words;
  for (const std::u32string& w : split_u32(s)) words.push_back(utf8_encode(w));
  return join(words);
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  for (const std::u32string& w : split_u32(utf8_decode(text))) words.push_back(utf8_encode(w));
  return words;
}

std::vector<std::string> split_characters(std::string_view text) {
  std::vector<std::string> chars;
  for (char32_t c : utf8_decode(text))
    if (!is_space(c)) chars.push_back(utf8_encode(std::u32string(1, c)));
  return chars;
}

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= text.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cb = static_cast<uint8_t>(text[i + k]);
      if ((cb >> 6) != 2) ok = false;
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out += U'\uFFFD';
      ++i;
      continue;
    }
    out += c;
    i += len;
  }
  return out;
}

std::string utf8_encode(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace earshot::bench

#include "model/whisper/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <queue>

#include "common/error.h"
#include "common/utf8.h"

namespace earshot::whisper {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};
#include "model/whisper/unicode_classes.inc"

bool in_ranges(std::span<const CodePointRange> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t value, const CodePointRange& r) { return value < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// Unicode White_Space, which is what \s means in tiktoken's (Rust) regex engine.
bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

enum class CharClass { kLetter, kNumber, kSpace, kOther };

CharClass classify(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    return is_white_space(cp) ? CharClass::kSpace : CharClass::kOther;
  }
  if (in_ranges(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::kNumber;
  return is_white_space(cp) ? CharClass::kSpace : CharClass::kOther;
}

// Bytes still missing at the end of s to complete a valid UTF-8 sequence that
// has started there; 0 when s ends on a character boundary or the tail can
// never become valid.
size_t missing_tail_bytes(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t length = 0;
    if (c >= 0xC2 && c <= 0xDF) length = 2;
    if (c >= 0xE0 && c <= 0xEF) length = 3;
    if (c >= 0xF0 && c <= 0xF4) length = 4;
    return length > back ? length - back : 0;
  }
  return 0;
}

// One character of the input for pre-tokenisation; an invalid byte is a
// character of its own in the "other" class.
struct Char {
  size_t begin = 0;
  size_t end = 0;
  char32_t cp = 0;
  CharClass cls = CharClass::kOther;
};

std::vector<Char> split_chars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = 0xFFFD;
    size_t length = utf8_sequence_length(text, pos, &cp);
    const CharClass cls = length == 0 ? CharClass::kOther : classify(cp);
    if (length == 0) length = 1;
    chars.push_back({pos, pos + length, cp, cls});
    pos += length;
  }
  return chars;
}

// End (in chars) of the match of GPT-2's pre-tokenisation pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// at chars[i], trying the alternatives in order like a backtracking engine.
size_t match_pretoken(const std::vector<Char>& chars, size_t i) {
  const size_t n = chars.size();
  const auto cp_at = [&](size_t k) { return k < n ? chars[k].cp : char32_t{0}; };
  if (chars[i].cp == U'\'') {
    const char32_t a = cp_at(i + 1), b = cp_at(i + 2);
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return i + 2;
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return i + 3;
  }
  // " ?X+" for letters, numbers and other: the optional space is only U+0020.
  const size_t start = chars[i].cp == U' ' ? i + 1 : i;
  if (start < n && chars[start].cls != CharClass::kSpace) {
    const CharClass cls = chars[start].cls;
    size_t k = start;
    while (k < n && chars[k].cls == cls) ++k;
    return k;
  }
  // Whitespace: the whole run at the end of the text; otherwise all but its
  // last character (which then prefixes the next word), or one character.
  size_t k = i;
  while (k < n && chars[k].cls == CharClass::kSpace) ++k;
  if (k == n) return k;
  return k - i >= 2 ? k - 1 : k;
}

// GPT-2's byte alphabet: token i < 256 is this byte (printable ones first).
std::array<unsigned char, 256> gpt2_byte_order() {
  std::array<unsigned char, 256> order{};
  std::array<bool, 256> used{};
  size_t next = 0;
  for (int b = 0; b < 256; ++b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
      order[next++] = static_cast<unsigned char>(b);
      used[b] = true;
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (!used[b]) order[next++] = static_cast<unsigned char>(b);
  }
  return order;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool base64_decode(std::string_view text, std::string* out) {
  out->clear();
  uint32_t buffer = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) return false;  // data after padding
    const int value = base64_value(c);
    if (value < 0) return false;
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return padding <= 2;
}

bool is_ascii_punctuation_substring(std::string_view s) {
  // Python's `s in string.punctuation`: a substring test, true for "" as well.
  static constexpr std::string_view kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return kPunctuation.find(s) != std::string_view::npos;
}

std::string_view strip_spaces(std::string_view s) {
  // Python's str.strip(): Unicode whitespace, plus the separators 0x1C-0x1F.
  const auto chars = split_chars(s);
  size_t first = 0, last = chars.size();
  const auto is_space = [](const Char& c) { return c.cls == CharClass::kSpace || (c.cp >= 0x1C && c.cp <= 0x1F); };
  while (first < last && is_space(chars[first])) ++first;
  while (last > first && is_space(chars[last - 1])) --last;
  if (first == last) return {};
  return s.substr(chars[first].begin, chars[last - 1].end - chars[first].begin);
}

}  // namespace

Tokenizer::Tokenizer(std::vector<std::string> token_bytes, int32_t n_vocab) : n_vocab_(n_vocab) {
  SpecialTokens& s = special_;
  if (n_vocab == 51864) {
    s.eot = 50256;
    s.n_languages = 99;
  } else if (n_vocab == 51865) {
    s.eot = 50257;
    s.n_languages = 99;
  } else if (n_vocab == 51866) {
    s.eot = 50257;
    s.n_languages = 100;
  } else {
    throw Error(ErrorCode::kInvalidModel, "n_vocab " + std::to_string(n_vocab) +
                                              " matches no Whisper vocabulary (51864 English-only, 51865 "
                                              "multilingual, 51866 large-v3)");
  }
  s.sot = s.eot + 1;
  s.first_language = s.sot + 1;
  s.translate = s.first_language + s.n_languages;
  s.transcribe = s.translate + 1;
  s.sot_lm = s.transcribe + 1;
  s.sot_prev = s.transcribe + 2;
  s.no_speech = s.sot_prev + 1;
  s.no_timestamps = s.no_speech + 1;
  s.timestamp_begin = s.no_timestamps + 1;

  if (token_bytes.size() < static_cast<size_t>(s.eot)) {
    throw Error(ErrorCode::kInvalidModel, "vocabulary has " + std::to_string(token_bytes.size()) +
                                              " text tokens, a model with n_vocab " + std::to_string(n_vocab) +
                                              " needs " + std::to_string(s.eot));
  }
  token_bytes.resize(s.eot);  // ggml files may append special-token names; the layout defines those
  // Some converted vocabularies store tokens that are not valid UTF-8 as U+FFFD.
  // The 256 single-byte tokens are fixed by GPT-2's byte order, so repair them.
  static const std::array<unsigned char, 256> byte_order = gpt2_byte_order();
  for (size_t i = 0; i < byte_order.size(); ++i) {
    if (token_bytes[i] == "\xEF\xBF\xBD") token_bytes[i] = std::string(1, static_cast<char>(byte_order[i]));
  }
  token_bytes_ = std::move(token_bytes);
  rank_of_bytes_.reserve(token_bytes_.size());
  // First (lowest) id wins when a damaged vocabulary repeats a byte string.
  for (size_t id = 0; id < token_bytes_.size(); ++id)
    rank_of_bytes_.emplace(token_bytes_[id], static_cast<int32_t>(id));
}

Tokenizer Tokenizer::from_tiktoken(const std::filesystem::path& path, int32_t n_vocab) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot open tiktoken vocabulary " + path.string());
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  std::string line, bytes;
  size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    long long rank = -1;
    if (space != std::string::npos) {
      try {
        size_t used = 0;
        rank = std::stoll(line.substr(space + 1), &used);
        if (used != line.size() - space - 1) rank = -1;
      } catch (const std::exception&) {
        rank = -1;
      }
    }
    if (space == std::string::npos || rank < 0 || rank > 10'000'000 ||
        !base64_decode(std::string_view(line).substr(0, space), &bytes)) {
      throw Error(ErrorCode::kInvalidModel, path.string() + ":" + std::to_string(line_number) +
                                                ": expected `base64(bytes) rank`, got \"" + line.substr(0, 80) + "\"");
    }
    if (static_cast<size_t>(rank) >= tokens.size()) {
      tokens.resize(rank + 1);
      seen.resize(rank + 1, false);
    }
    if (seen[rank]) {
      throw Error(ErrorCode::kInvalidModel,
                  path.string() + ":" + std::to_string(line_number) + ": rank " + std::to_string(rank) + " repeated");
    }
    seen[rank] = true;
    tokens[rank] = bytes;
  }
  const auto gap = std::find(seen.begin(), seen.end(), false);
  if (gap != seen.end()) {
    throw Error(ErrorCode::kInvalidModel,
                path.string() + ": rank " + std::to_string(gap - seen.begin()) + " is missing");
  }
  return Tokenizer(std::move(tokens), n_vocab);
}

const std::string& Tokenizer::token_bytes(int32_t token) const {
  static const std::string kEmpty;
  if (token < 0 || token >= n_vocab_) {
    throw Error(ErrorCode::kInvalidArgument,
                "token " + std::to_string(token) + " out of range [0, " + std::to_string(n_vocab_) + ")");
  }
  return is_special(token) ? kEmpty : token_bytes_[token];
}

std::string Tokenizer::decode(std::span<const int32_t> tokens) const {
  std::string text;
  for (int32_t token : tokens) text += token_bytes(token);
  return text;
}

std::string Tokenizer::token_to_string(int32_t token) const {
  if (!is_special(token) || token >= n_vocab_) return token_bytes(token);
  const SpecialTokens& s = special_;
  if (token >= s.timestamp_begin) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "<|%.2f|>", (token - s.timestamp_begin) * 0.02);
    return buffer;
  }
  if (token >= s.first_language && token < s.first_language + s.n_languages) {
    return "<|" + std::string(languages()[token - s.first_language].code) + "|>";
  }
  if (token == s.eot) return "<|endoftext|>";
  if (token == s.sot) return "<|startoftranscript|>";
  if (token == s.translate) return "<|translate|>";
  if (token == s.transcribe) return "<|transcribe|>";
  if (token == s.sot_lm) return "<|startoflm|>";
  if (token == s.sot_prev) return "<|startofprev|>";
  if (token == s.no_speech) return "<|nospeech|>";
  if (token == s.no_timestamps) return "<|notimestamps|>";
  throw Error(ErrorCode::kInternal, "special token " + std::to_string(token) + " has no name");
}

std::vector<int32_t> Tokenizer::encode(std::string_view utf8) const {
  std::vector<int32_t> tokens;
  const std::vector<Char> chars = split_chars(utf8);
  constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  // Parts of one piece as a linked list over their first byte: part_end[start]
  // is the end of the part starting there (kNone once merged away).
  std::vector<size_t> part_end, part_prev, bounds;
  struct PendingMerge {
    int32_t rank;
    size_t left;
    size_t pair_end;
    bool operator>(const PendingMerge& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<PendingMerge, std::vector<PendingMerge>, std::greater<PendingMerge>> heap;
  const auto rank_of = [&](std::string_view bytes) {
    auto it = rank_of_bytes_.find(std::string(bytes));
    return it == rank_of_bytes_.end() ? kNoRank : it->second;
  };

  for (size_t i = 0; i < chars.size();) {
    const size_t end = match_pretoken(chars, i);
    const std::string_view piece = utf8.substr(chars[i].begin, chars[end - 1].end - chars[i].begin);
    i = end;
    if (const int32_t whole = rank_of(piece); whole != kNoRank) {
      tokens.push_back(whole);
      continue;
    }
    // Byte pair merging: repeatedly merge the adjacent pair whose concatenation
    // has the lowest rank (leftmost on ties), as tiktoken does. A heap keyed by
    // (rank, position) with lazily dropped stale pairs keeps long pieces
    // O(n log n) instead of tiktoken's O(n^2).
    const size_t n = piece.size();
    part_end.resize(n);
    part_prev.resize(n);
    for (size_t b = 0; b < n; ++b) {
      part_end[b] = b + 1;
      part_prev[b] = b == 0 ? kNone : b - 1;
    }
    const auto push_pair = [&](size_t left) {
      if (left == kNone || part_end[left] >= n) return;
      const size_t pair_end = part_end[part_end[left]];
      const int32_t rank = rank_of(piece.substr(left, pair_end - left));
      if (rank != kNoRank) heap.push({rank, left, pair_end});
    };
    for (size_t b = 0; b + 1 < n; ++b) push_pair(b);
    while (!heap.empty()) {
      const PendingMerge merge = heap.top();
      heap.pop();
      // Stale when the left part was absorbed (its end moved or it is no longer
      // a part start) or the right part grew since the pair was pushed.
      const size_t left = merge.left;
      if (part_end[left] == kNone || part_end[left] >= n || part_end[part_end[left]] != merge.pair_end) continue;
      const size_t right = part_end[left];
      part_end[left] = merge.pair_end;
      part_end[right] = kNone;
      if (merge.pair_end < n) part_prev[merge.pair_end] = left;
      push_pair(part_prev[left]);
      push_pair(left);
    }
    bounds.clear();
    for (size_t b = 0; b < n; b = part_end[b]) bounds.push_back(b);
    bounds.push_back(n);
    for (size_t p = 0; p + 1 < bounds.size(); ++p) {
      const std::string_view part = piece.substr(bounds[p], bounds[p + 1] - bounds[p]);
      const int32_t rank = rank_of(part);
      if (rank == kNoRank) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(part[0]));
        throw Error(ErrorCode::kInvalidModel, std::string("vocabulary has no token for byte ") + hex +
                                                  "; a byte-level BPE vocabulary needs all 256 bytes");
      }
      tokens.push_back(rank);
    }
  }
  return tokens;
}

std::optional<int32_t> Tokenizer::language_token(std::string_view code) const {
  if (!is_multilingual()) return std::nullopt;
  const auto langs = languages().first(special_.n_languages);
  for (size_t i = 0; i < langs.size(); ++i) {
    if (langs[i].code == code) return special_.first_language + static_cast<int32_t>(i);
  }
  return std::nullopt;
}

std::string_view Tokenizer::language_code_of_token(int32_t token) const {
  const int32_t n = special_.n_languages;
  if (token >= special_.first_language && token < special_.first_language + n) {
    return is_multilingual() ? languages()[token - special_.first_language].code : std::string_view();
  }
  if (token >= 0 && token < n) return languages()[token].code;  // a language index
  return {};
}

std::vector<int32_t> Tokenizer::sot_sequence(std::string_view language, Task task) const {
  std::vector<int32_t> sequence = {special_.sot};
  if (!is_multilingual()) return sequence;
  if (!language.empty()) {
    const std::optional<int32_t> token = language_token(language);
    if (!token) {
      throw Error(ErrorCode::kInvalidArgument, "unknown language \"" + std::string(language) + "\" for a model with " +
                                                   std::to_string(special_.n_languages) + " languages");
    }
    sequence.push_back(*token);
  }
  sequence.push_back(task == Task::kTranslate ? special_.translate : special_.transcribe);
  return sequence;
}

std::vector<Tokenizer::Word> Tokenizer::split_to_words(std::span<const int32_t> tokens,
                                                       std::string_view language) const {
  // Units first: the shortest runs of tokens that decode to whole characters
  // (a character split across tokens stays in one unit); special tokens are
  // units of their own.
  std::vector<Word> units;
  std::string pending_bytes;
  std::vector<int32_t> pending_tokens;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t token = tokens[i];
    if (is_special(token)) {
      if (!pending_tokens.empty()) units.push_back({std::move(pending_bytes), std::move(pending_tokens)});
      pending_bytes.clear();
      pending_tokens.clear();
      units.push_back({token_to_string(token), {token}});
      continue;
    }
    pending_bytes += token_bytes(token);
    pending_tokens.push_back(token);
    // Keep collecting only while the tail is an incomplete character that the
    // following tokens continue.
    bool wait_for_more = false;
    if (const size_t missing = missing_tail_bytes(pending_bytes); missing > 0) {
      std::string upcoming;
      for (size_t j = i + 1; j < tokens.size() && upcoming.size() < missing && !is_special(tokens[j]); ++j) {
        upcoming += token_bytes(tokens[j]);
      }
      // Bytes that continue the character (as far as the tokens go) keep the
      // unit open; an incomplete character at the very end stays one unit.
      wait_for_more = true;
      for (size_t b = 0; wait_for_more && b < std::min(missing, upcoming.size()); ++b) {
        wait_for_more = (static_cast<unsigned char>(upcoming[b]) & 0xC0) == 0x80;
      }
      if (wait_for_more) {
        // The part before the incomplete tail must itself be valid UTF-8.
        size_t tail_start = pending_bytes.size();
        while (tail_start > 0 && (static_cast<unsigned char>(pending_bytes[tail_start - 1]) & 0xC0) == 0x80) {
          --tail_start;
        }
        wait_for_more = tail_start > 0 && is_valid_utf8(std::string_view(pending_bytes).substr(0, tail_start - 1));
      }
    }
    if (!wait_for_more) {
      units.push_back({std::move(pending_bytes), std::move(pending_tokens)});
      pending_bytes.clear();
      pending_tokens.clear();
    }
  }
  if (!pending_tokens.empty()) units.push_back({std::move(pending_bytes), std::move(pending_tokens)});

  static constexpr std::array<std::string_view, 6> kUnitLanguages = {"zh", "ja", "th", "lo", "my", "yue"};
  if (std::find(kUnitLanguages.begin(), kUnitLanguages.end(), language) != kUnitLanguages.end()) return units;

  // Space-delimited scripts: a unit starts a new word when it is special,
  // begins with a space, or is punctuation; otherwise it continues the word.
  std::vector<Word> words;
  for (Word& unit : units) {
    const bool special = is_special(unit.tokens.front());
    const bool with_space = !unit.text.empty() && unit.text.front() == ' ';
    if (words.empty() || special || with_space || is_ascii_punctuation_substring(strip_spaces(unit.text))) {
      words.push_back(std::move(unit));
    } else {
      words.back().text += unit.text;
      words.back().tokens.insert(words.back().tokens.end(), unit.tokens.begin(), unit.tokens.end());
    }
  }
  return words;
}

}  // namespace earshot::whisper

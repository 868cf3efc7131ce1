// Whisper's tokenizer: byte-level BPE over the model's vocabulary (the token id
// is the merge rank), special tokens laid out from n_vocab, languages, and
// splitting of token sequences into words.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/asr_text.h"

namespace earshot::whisper {

using Task = earshot::Task;

struct SpecialTokens {
  int32_t eot = 0;
  int32_t sot = 0;
  int32_t first_language = 0;  // sot + 1
  int32_t n_languages = 0;     // 99, or 100 for large-v3
  int32_t translate = 0;
  int32_t transcribe = 0;
  int32_t sot_lm = 0;
  int32_t sot_prev = 0;
  int32_t no_speech = 0;
  int32_t no_timestamps = 0;
  int32_t timestamp_begin = 0;  // <|0.00|>; 1501 timestamps follow, 20 ms apart
};

// Whisper's languages in token order: code ("en") and English name ("english").
struct Language {
  std::string_view code;
  std::string_view name;
};
std::span<const Language> languages();  // 100 entries; models without yue use the first 99

class Tokenizer {
 public:
  // token_bytes[id] are the exact bytes of each text token (ids below eot);
  // n_vocab decides the special-token layout (51864 English, 51865 multilingual,
  // 51866 large-v3). Throws kInvalidModel when n_vocab fits no layout.
  // Entries past the text tokens are ignored. Some converted ggml vocabularies
  // store non-UTF-8 tokens as U+FFFD: the 256 single-byte tokens are repaired
  // (GPT-2's byte order fixes them), longer ones cannot be; prefer the tiktoken
  // file when exact bytes matter.
  Tokenizer(std::vector<std::string> token_bytes, int32_t n_vocab);

  // Reads a `base64(bytes) rank` tiktoken file (../shared/models/whisper-*.tiktoken).
  static Tokenizer from_tiktoken(const std::filesystem::path& path, int32_t n_vocab);

  int32_t n_vocab() const { return n_vocab_; }
  bool is_multilingual() const { return n_vocab_ >= 51865; }
  const SpecialTokens& special() const { return special_; }
  bool is_special(int32_t token) const { return token >= special_.eot; }

  // Bytes of the text tokens (special tokens are skipped); may be invalid UTF-8
  // when a multi-byte character is split across tokens.
  std::string decode(std::span<const int32_t> tokens) const;
  const std::string& token_bytes(int32_t token) const;
  // "<|en|>", "<|startoftranscript|>", "<|1.20|>" ... for special tokens.
  std::string token_to_string(int32_t token) const;

  // Exact byte-level BPE encoding, as tiktoken does (GPT-2 pre-tokenisation regex).
  std::vector<int32_t> encode(std::string_view utf8) const;

  // Language token for a code ("en"); nullopt for unknown codes or a code the
  // model lacks (English-only models have none).
  std::optional<int32_t> language_token(std::string_view code) const;
  // Code for a language token or language index; "" when not a language.
  std::string_view language_code_of_token(int32_t token) const;

  // <|startoftranscript|> [<|lang|> <|task|>] — the language and task only on
  // multilingual models; language may be empty when not yet known.
  std::vector<int32_t> sot_sequence(std::string_view language, Task task) const;

  struct Word {
    std::string text;  // bytes, leading space kept for space-delimited scripts
    std::vector<int32_t> tokens;
  };
  // Splits text tokens into words: a new word starts at a token beginning with a
  // space or punctuation for space-delimited scripts; for zh/ja/th/lo/my/yue
  // (CJK and others without spaces) every complete character is a unit.
  // Precisely (Whisper's rule): tokens first group into the shortest runs that
  // end on a UTF-8 character boundary (a character split across tokens stays in
  // one unit; an incomplete one at the end is a unit of its own); a special token
  // is a word by itself with its token_to_string() text.
  std::vector<Word> split_to_words(std::span<const int32_t> tokens, std::string_view language) const;

 private:
  int32_t n_vocab_ = 0;
  SpecialTokens special_;
  std::vector<std::string> token_bytes_;
  std::unordered_map<std::string, int32_t> rank_of_bytes_;
};

}  // namespace earshot::whisper

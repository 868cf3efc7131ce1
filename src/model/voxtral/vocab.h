// Voxtral's vocabulary (Mistral's tekken: byte-level BPE, the first 1000 ids
// control tokens) as transcribe.cpp's GGUF carries it: tokenizer.ggml.tokens
// holds each normal token's bytes in GPT-2's byte-to-unicode spelling, each
// control token's name ("<s>", "[STREAMING_PAD]"), tokenizer.ggml.token_type
// says which is which (3 = control). Decoding only: the model never reads text.
// A word starts at a token whose bytes start with a space, and at
// [STREAMING_WORD], which the model emits before a word and which carries no text.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/transducer_stream.h"

namespace earshot::runtime {
class GgufFile;
}

namespace earshot::voxtral {

class Vocab : public TokenPieces {
 public:
  Vocab() = default;
  // pieces[i]: token i's bytes, or its name for a control token.
  Vocab(std::vector<std::string> pieces, std::vector<bool> control);
  // From transcribe.cpp's keys, n_vocab entries. Throws Error(kInvalidModel)
  // naming the key for a missing or malformed table, kUnsupported for a
  // tokenizer other than tekken's byte-level BPE.
  static Vocab from_gguf(const runtime::GgufFile& file, int n_vocab, const std::string& label);

  int size() const { return static_cast<int>(pieces_.size()); }
  bool is_control(int id) const { return id < 0 || id >= size() || control_[id]; }
  // A normal token's bytes; "" for a control token or an id outside the vocabulary.
  std::string_view bytes(int id) const;
  // A control token's name ("[STREAMING_PAD]"); "" otherwise.
  std::string_view control_name(int id) const;
  // The control token of that name, -1 when none.
  int find_control(std::string_view name) const;
  // The bytes of the normal tokens among ids, concatenated (mistral-common's
  // decode with special tokens ignored).
  std::string decode(std::span<const int> ids) const;

  // TokenPieces, for the word assembler: a normal token's bytes (without the
  // leading space at the start of a text), "" for control tokens.
  std::string text(int token, bool first_in_text) const override;
  bool starts_word(int token) const override;
  std::string language_tag(int /*token*/) const override { return ""; }

 private:
  std::vector<std::string> pieces_;
  std::vector<bool> control_;
  int streaming_word_ = -1;
};

// GPT-2's reversible byte <-> printable-character mapping (what
// tokenizer.ggml.tokens spells bytes with), as UTF-8 text.
std::string gpt2_spelling(std::string_view bytes);
// The bytes a GPT-2 spelling stands for; nullopt for a character outside the mapping.
std::optional<std::string> gpt2_bytes(std::string_view spelling);

}  // namespace earshot::voxtral

#include "model/voxtral/vocab.h"

#include <array>

#include "common/error.h"
#include "common/utf8.h"
#include "model/runtime/gguf_file.h"

namespace earshot::voxtral {
namespace {

constexpr int kControlType = 3;  // llama.cpp's LLAMA_TOKEN_TYPE_CONTROL

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes for U+0100 onwards, in byte order.
const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

std::string gpt2_spelling(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_to_char()[b]);
  return out;
}

std::optional<std::string> gpt2_bytes(std::string_view spelling) {
  static const std::array<int, 512> char_to_byte = [] {
    std::array<int, 512> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_char()[b]] = b;
    return t;
  }();
  std::string out;
  for (size_t i = 0; i < spelling.size();) {
    char32_t c = 0;
    const size_t n = utf8_sequence_length(spelling, i, &c);
    if (n == 0 || c >= char_to_byte.size() || char_to_byte[c] < 0) return std::nullopt;
    out += static_cast<char>(char_to_byte[c]);
    i += n;
  }
  return out;
}

Vocab::Vocab(std::vector<std::string> pieces, std::vector<bool> control)
    : pieces_(std::move(pieces)), control_(std::move(control)) {
  if (control_.size() != pieces_.size())
    throw Error(ErrorCode::kInternal, "voxtral::Vocab: pieces and control flags differ in number");
  streaming_word_ = find_control("[STREAMING_WORD]");
}

Vocab Vocab::from_gguf(const runtime::GgufFile& file, int n_vocab, const std::string& label) {
  const std::string model = file.find_string("tokenizer.ggml.model").value_or("");
  if (model != "gpt2")
    throw Error(ErrorCode::kUnsupported, label + ": tokenizer.ggml.model '" + model +
                                             "' (Voxtral's tekken vocabulary is byte-level BPE: 'gpt2')");
  const std::vector<std::string> tokens = file.get_array<std::string>("tokenizer.ggml.tokens");
  const std::vector<int32_t> types = file.get_array<int32_t>("tokenizer.ggml.token_type");
  if (static_cast<int>(tokens.size()) != n_vocab || types.size() != tokens.size())
    throw Error(ErrorCode::kInvalidModel, label + ": tokenizer.ggml.tokens holds " + std::to_string(tokens.size()) +
                                              " tokens and token_type " + std::to_string(types.size()) +
                                              ", the decoder's vocabulary " + std::to_string(n_vocab));
  std::vector<std::string> pieces(tokens.size());
  std::vector<bool> control(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    control[i] = types[i] == kControlType;
    if (control[i]) {
      pieces[i] = tokens[i];
      continue;
    }
    std::optional<std::string> bytes = gpt2_bytes(tokens[i]);
    if (!bytes)
      throw Error(ErrorCode::kInvalidModel, label + ": token " + std::to_string(i) + " of tokenizer.ggml.tokens ('" +
                                                to_valid_utf8(tokens[i]) + "') is not a byte-level spelling");
    pieces[i] = std::move(*bytes);
  }
  return Vocab(std::move(pieces), std::move(control));
}

std::string_view Vocab::bytes(int id) const { return is_control(id) ? std::string_view() : pieces_[id]; }

std::string_view Vocab::control_name(int id) const {
  return id >= 0 && id < size() && control_[id] ? std::string_view(pieces_[id]) : std::string_view();
}

int Vocab::find_control(std::string_view name) const {
  for (int i = 0; i < size(); ++i)
    if (control_[i] && pieces_[i] == name) return i;
  return -1;
}

std::string Vocab::decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) out += bytes(id);
  return out;
}

std::string Vocab::text(int token, bool first_in_text) const {
  std::string_view b = bytes(token);
  if (first_in_text && !b.empty() && b.front() == ' ') b.remove_prefix(1);
  return std::string(b);
}

bool Vocab::starts_word(int token) const {
  if (token == streaming_word_ && streaming_word_ >= 0) return true;
  const std::string_view b = bytes(token);
  return !b.empty() && b.front() == ' ';
}

}  // namespace earshot::voxtral

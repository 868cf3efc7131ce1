// What the translation stage (and any other LLM user) sees of a decoder-only
// language model: tokens in, greedy tokens and attention rows out. The model is
// loaded once, immutable and shared across threads (LlmModel); each stream owns
// an LlmSession (its own KV cache and captured attention). The translation
// engine is written against these two interfaces only, so its logic is tested
// with a scripted fake, and libllama (llama_backend.h) is one implementation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::llm {

using Token = std::int32_t;

// One (layer, head) pair whose attention the caller reads; heads are query
// heads (under GQA several share a KV head).
struct AttentionHead {
  int layer = 0;
  int head = 0;
  friend bool operator==(const AttentionHead&, const AttentionHead&) = default;
};

// Post-softmax attention of the tokens of one decode call over a column span of
// KV positions [column_begin, column_end), for the heads asked for, in the order
// asked. Columns are positions (the backend asserts cell == position).
struct AttentionRows {
  int n_tokens = 0;
  int n_heads = 0;
  int column_begin = 0;
  int column_end = 0;
  std::vector<float> values;  // [token][head][column - column_begin]

  int n_columns() const { return column_end - column_begin; }
  float at(int token, int head, int column) const {
    return values[(static_cast<std::size_t>(token) * n_heads + head) * n_columns() + (column - column_begin)];
  }
};

struct ModelShape {
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
};

class LlmSession;

struct SessionOptions {
  int context_tokens = 4096;  // KV positions this session may hold
  int threads = 0;            // 0: the model's default
};

class LlmModel {
 public:
  virtual ~LlmModel() = default;

  // Identifier as the calibration registry keys it (file or general.name).
  virtual std::string id() const = 0;
  virtual std::string architecture() const = 0;  // general.architecture ("hunyuan-dense", "qwen3", ...)
  virtual ModelShape shape() const = 0;

  // parse_special: control tokens written in the text ("<|im_start|>") become
  // their ids; otherwise they are tokenised as plain text.
  virtual std::vector<Token> tokenize(std::string_view text, bool parse_special) const = 0;
  // The raw bytes of one token (may be an incomplete UTF-8 sequence).
  virtual std::string token_bytes(Token token) const = 0;
  // A single token id for this exact text, if the vocabulary has one.
  virtual std::vector<Token> find_tokens(std::string_view text) const = 0;
  // End of generation (EOS, EOT, im_end, ...), as the vocabulary marks it.
  virtual bool is_end_of_generation(Token token) const = 0;

  virtual std::unique_ptr<LlmSession> open_session(const SessionOptions& options) const = 0;
};

class LlmSession {
 public:
  virtual ~LlmSession() = default;

  // The heads and the KV column span the next decode calls capture. An empty
  // head list captures nothing (the backend may then use flash attention).
  virtual void set_attention_capture(std::vector<AttentionHead> heads, int column_begin, int column_end) = 0;

  // Appends `tokens` at positions [position(), position() + size) and evaluates
  // them. Returns the captured attention of these tokens (empty rows when no
  // capture is set). Throws earshot::Error when the context is full.
  virtual AttentionRows decode(std::span<const Token> tokens) = 0;

  // Decodes `tokens` as decode() does and also returns the greedy choice after
  // each of tokens[first..]: greedy_after[i] is the argmax of the logits of
  // tokens[first + i] (the last one is greedy()). Speculative verification's
  // primitive: a prompt's new tokens and a proposed continuation checked in one
  // call instead of one call per token; the rows before `first` get no logits
  // (a prompt's would cost the output layer and n_vocab floats each). The
  // default decodes tokens[..first) in one call, then one token at a time
  // (plain step-by-step greedy, as a scripted session needs); LlamaSession
  // evaluates one batch with logits on the rows from `first`.
  virtual AttentionRows decode_each(std::span<const Token> tokens, int first, std::vector<Token>& greedy_after);

  // Greedy choice over the logits of the last decoded token.
  virtual Token greedy() const = 0;
  // Log-probabilities of the last decoded token (n_vocab entries).
  virtual std::vector<float> last_log_probs() const = 0;

  // A hint for a backend that batches several sessions' calls (BatchedLlamaModel):
  // true while this session runs a greedy loop, whose next decode follows each
  // result at once, so a batch may wait for it; false (before leaving the loop,
  // on every path) when no call follows. Forgetting the false would hold other
  // sessions' calls up to a full batch; the default ignores it.
  virtual void set_stepping(bool /*on*/) {}

  // Number of positions held (the next token's position).
  virtual int position() const = 0;
  // Forgets positions [from, position()); later decodes continue at `from`.
  virtual void remove_suffix(int from) = 0;
};

inline AttentionRows LlmSession::decode_each(std::span<const Token> tokens, int first,
                                             std::vector<Token>& greedy_after) {
  greedy_after.clear();
  const std::size_t head = std::min(tokens.size(), static_cast<std::size_t>(std::max(first, 0)));
  AttentionRows all;
  if (head > 0) all = decode(tokens.first(head));
  for (std::size_t i = head; i < tokens.size(); ++i) {
    AttentionRows one = decode(tokens.subspan(i, 1));
    greedy_after.push_back(greedy());
    if (all.n_tokens == 0) {
      all = std::move(one);
      continue;
    }
    all.n_tokens += one.n_tokens;
    all.values.insert(all.values.end(), one.values.begin(), one.values.end());
  }
  return all;
}

}  // namespace earshot::llm

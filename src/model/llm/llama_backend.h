// The LlmBackend on libllama (llama.cpp v0.5.0, linked against earshot's ggml):
// one llama_model shared by every stream, one llama_context per LlmSession.
//
//   auto model = llm::LlamaModel::load("Hy-MT2-1.8B-Q8_0.gguf", {});
//   auto session = model->open_session({.context_tokens = 2048});
//   session->set_attention_capture({{9, 5}, {13, 1}}, source_begin, source_end);
//   llm::AttentionRows rows = session->decode(prompt);
//   llm::Token next = session->greedy();
#pragma once

#include <ggml.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/llm/attention_capture.h"
#include "model/llm/llm_backend.h"

struct llama_context;
struct llama_model;
struct llama_vocab;

namespace earshot::llm {

// general.architecture values this backend accepts: the decoder-only
// architectures translation models ship in (Hy-MT2 / Hunyuan-MT, Qwen, Gemma).
const std::vector<std::string>& supported_architectures();

struct LlamaModelOptions {
  int threads = 0;      // per session, when SessionOptions.threads is 0; 0: min(4, hardware threads)
  int gpu_layers = -1;  // layers offloaded to a GPU device when ggml has one; -1: all
  // KV cache element type; F32 gives bit-tight comparisons with a reference.
  ggml_type cache_type = GGML_TYPE_F16;
  // Flash attention creates no softmax tensor to read, so with the softmax
  // route a context with it cannot capture attention; the default keeps capture
  // available to every session (a llama_context cannot switch later).
  bool flash_attention = false;
  // How captured attention is read (attention_capture.h). kQk turns flash
  // attention on for every context (that is what it is for) and recomputes the
  // chosen heads' rows from Q and the K cache.
  AttentionRoute attention_route = AttentionRoute::kSoftmax;
  bool warm_up = true;  // one tiny decode at load, so the first stream pays no first-use cost
};

class LlamaModel final : public LlmModel, public std::enable_shared_from_this<LlamaModel> {
 public:
  // Throws earshot::Error: kIo / kInvalidModel for a missing, foreign or truncated
  // file (what earshot's GGUF reader says), kUnsupported for an architecture not
  // in supported_architectures() (naming them), kInvalidModel when libllama
  // refuses the file (with libllama's last error line).
  static std::shared_ptr<const LlamaModel> load(const std::filesystem::path& path, const LlamaModelOptions& options);

  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  ~LlamaModel() override;

  std::string id() const override { return id_; }
  std::string architecture() const override { return architecture_; }
  ModelShape shape() const override { return shape_; }
  std::vector<Token> tokenize(std::string_view text, bool parse_special) const override;
  std::string token_bytes(Token token) const override;
  // Every id whose raw bytes are exactly `text` (ascending; usually none or one).
  std::vector<Token> find_tokens(std::string_view text) const override;
  bool is_end_of_generation(Token token) const override;
  std::unique_ptr<LlmSession> open_session(const SessionOptions& options) const override;

  llama_model* raw() const { return model_; }
  const LlamaModelOptions& options() const { return options_; }

 private:
  LlamaModel() = default;

  llama_model* model_ = nullptr;
  const llama_vocab* vocab_ = nullptr;
  LlamaModelOptions options_;
  std::string id_;
  std::string architecture_;
  ModelShape shape_;
  std::unordered_multimap<std::string, Token> ids_by_bytes_;
};

// One stream: its own llama_context (KV cache of SessionOptions.context_tokens
// positions, one sequence) over the shared model. Not thread-safe; one thread at
// a time per session, any number of sessions at once.
class LlamaSession final : public LlmSession {
 public:
  LlamaSession(std::shared_ptr<const LlamaModel> model, const SessionOptions& options);
  ~LlamaSession() override;
  LlamaSession(const LlamaSession&) = delete;
  LlamaSession& operator=(const LlamaSession&) = delete;

  // Throws Error(kUnsupported) for heads on a flash-attention context of the
  // softmax route and
  // Error(kInvalidArgument) for a layer or head the model does not have.
  void set_attention_capture(std::vector<AttentionHead> heads, int column_begin, int column_end) override;
  AttentionRows decode(std::span<const Token> tokens) override;
  // One batch (split only at the context's batch size), logits on the rows from `first`.
  AttentionRows decode_each(std::span<const Token> tokens, int first, std::vector<Token>& greedy_after) override;
  Token greedy() const override;
  std::vector<float> last_log_probs() const override;
  int position() const override { return position_; }
  void remove_suffix(int from) override;

  // The raw logits of the last decoded token (n_vocab).
  std::span<const float> last_logits() const;
  // For the tests that pin llama.cpp's internal tensor names.
  AttentionCapture& capture() { return *capture_; }

 private:
  // decode() and decode_each(): greedy_after null = logits of the last token only.
  AttentionRows decode_tokens(std::span<const Token> tokens, int first, std::vector<Token>* greedy_after);

  std::shared_ptr<const LlamaModel> model_;
  std::unique_ptr<AttentionCapture> capture_;  // stable address: the context's cb_eval_user_data
  llama_context* ctx_ = nullptr;
  int context_tokens_ = 0;
  int batch_tokens_ = 0;
  int position_ = 0;
  bool has_logits_ = false;
};

// Shared with the batched sessions (batched_llama.cpp).
namespace detail {
std::string take_last_llama_error();  // libllama's last error line since the last call
int default_threads(const LlamaModelOptions& options);
// Throws what LlamaSession::set_attention_capture documents.
void check_capture_heads(const LlamaModel& model, const std::vector<AttentionHead>& heads);
}  // namespace detail

// Routes libllama's (and ggml's) log to `sink`: warnings and errors only, the
// rest of its load chatter dropped. The default sink writes "earshot: llama: ..."
// to stderr. Process-wide, as llama_log_set is.
void set_llama_log_sink(std::function<void(const std::string&)> sink);

// The greedy token and the log-softmax (summed in double) of a row of logits: what
// every session on libllama (LlamaSession, BatchedLlamaModel's) returns from
// greedy() and last_log_probs().
Token argmax_token(std::span<const float> logits);
std::vector<float> log_probabilities(std::span<const float> logits);

}  // namespace earshot::llm

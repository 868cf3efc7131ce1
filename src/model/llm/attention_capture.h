// Post-softmax attention rows of chosen (layer, head) pairs, read out of a running
// llama.cpp graph through the scheduler's evaluation callback (cb_eval). Without
// flash attention llama.cpp names each layer's softmax output
// `kq_soft_max-<layer>`: F32, contiguous, [n_kv, n_tokens, n_head], element
// (cell j, token t, head h) at j + t*n_kv + h*n_kv*n_tokens. The capture claims
// only the layers it needs (each claimed node costs a scheduler sync) and copies
// only the needed heads. These names are llama.cpp internals, not API: finish()
// fails loudly when a claimed layer never showed up.
//
// Reusable by any libllama user (translation, Qwen3-ASR): set
// llama_context_params.cb_eval = AttentionCapture::eval_callback and
// cb_eval_user_data = &capture, then bracket each llama_decode with
// begin_decode()/finish().
#pragma once

#include <ggml-backend.h>

#include <string>
#include <string_view>
#include <vector>

#include "model/llm/llm_backend.h"

namespace earshot::llm {

inline constexpr std::string_view kSoftmaxTensorPrefix = "kq_soft_max-";

class AttentionCapture {
 public:
  // Heads in the order rows are returned; columns [column_begin, column_end) are
  // KV positions. Throws Error(kInvalidArgument) for a negative layer or head or
  // an empty or reversed span (with heads).
  void set(std::vector<AttentionHead> heads, int column_begin, int column_end);
  bool active() const { return !heads_.empty(); }
  const std::vector<AttentionHead>& heads() const { return heads_; }

  // Before a llama_decode of n_tokens tokens whose first is at first_position
  // (one sequence, so KV cell == position is expected and checked).
  void begin_decode(int first_position, int n_tokens);
  // After it: the rows of those tokens. Throws Error(kInternal) when a claimed
  // layer's softmax never arrived (renamed tensor, flash attention on), had an
  // unexpected layout, or broke an invariant: a row must put all its mass on
  // cells <= its position (cell == position; masked cells are exactly 0) and
  // sum to 1.
  AttentionRows finish();

  // ggml_backend_sched_eval_callback; user_data is the AttentionCapture.
  static bool eval_callback(ggml_tensor* tensor, bool ask, void* user_data);

  // Every tensor name the callback was asked about since the last begin_decode
  // (only while record_names is on): for the tests that pin llama.cpp's names.
  bool record_names = false;
  const std::vector<std::string>& seen_names() const { return seen_names_; }

 private:
  bool wants(const ggml_tensor* tensor, int* layer) const;
  void take(const ggml_tensor* tensor, int layer);
  void fail(std::string message);

  std::vector<AttentionHead> heads_;
  std::vector<int> layers_;  // distinct layers of heads_, ascending
  int column_begin_ = 0;
  int column_end_ = 0;

  int first_position_ = 0;
  int n_tokens_ = 0;
  std::vector<int> tokens_done_;  // per entry of layers_: tokens captured in this decode
  std::vector<float> values_;     // [token][head][column]
  std::vector<float> scratch_;
  std::string error_;
  std::vector<std::string> seen_names_;
};

}  // namespace earshot::llm

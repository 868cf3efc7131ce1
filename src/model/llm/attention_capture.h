// Post-softmax attention rows of chosen (layer, head) pairs, read out of a running
// llama.cpp graph through the scheduler's evaluation callback (cb_eval), by one
// of two routes:
//
//  - kSoftmax (flash attention off): llama.cpp names each layer's softmax output
//    `kq_soft_max-<layer>`: F32, contiguous, [n_kv, n_tokens, n_head], element
//    (cell j, token t, head h) at j + t*n_kv + h*n_kv*n_tokens; the capture copies
//    the needed heads.
//  - kQk (flash attention on, which computes no softmax tensor): the capture
//    claims each calibrated layer's GGML_OP_FLASH_ATTN_EXT node, whose K operand
//    is a view of that layer's KV cache `cache_k_l<layer>` (through a cast to F16
//    when the cache is F32; the capture reads the cache itself), Q operand the
//    post-RoPE Q the attention consumes (`Qcur-<layer>`, or `Qcur_norm-<layer>`
//    where the norm follows RoPE, as in hunyuan-dense) and mask the causal mask;
//    it recomputes softmax(Q K^T * scale + mask) for just the chosen heads over
//    every cell (GQA: query head h reads KV head h / (n_head / n_head_kv)). Q is
//    identified through the node rather than by name because its last name
//    differs per architecture.
//
// Both routes claim only the layers they need (each claimed node costs a
// scheduler sync) and return the same rows. These names are llama.cpp
// internals, not API: finish() fails loudly when a claimed layer never showed up.
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
inline constexpr std::string_view kKeyCachePrefix = "cache_k_l";

enum class AttentionRoute {
  kSoftmax,  // read `kq_soft_max-<layer>`; needs flash attention off
  kQk,       // recompute from the flash-attention node's Q and K; needs it on
};

// "softmax" or "qk"; throws Error(kInvalidArgument) naming both otherwise.
AttentionRoute parse_attention_route(std::string_view name);
std::string_view attention_route_name(AttentionRoute route);

class AttentionCapture {
 public:
  explicit AttentionCapture(AttentionRoute route = AttentionRoute::kSoftmax) : route_(route) {}
  AttentionRoute route() const { return route_; }

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

  // For a context that evaluates several sequences as KV streams (one stream
  // per sequence, kv_unified off: the softmax is [n_kv, n_tokens, n_head,
  // n_stream], the flash-attention operands likewise in dim 3), where one
  // callback serves several captures: whether this capture claims `tensor`,
  // and take this capture's rows from stream `stream` of it (cell == position
  // within the stream).
  bool claims(const ggml_tensor* tensor) const;
  void take_stream(const ggml_tensor* tensor, int stream);

  // Every tensor name the callback was asked about since the last begin_decode
  // (only while record_names is on): for the tests that pin llama.cpp's names. A
  // flash-attention node is listed as "flash_attn_ext(<Q operand>, <K operand>)",
  // the K operand behind a cast.
  bool record_names = false;
  const std::vector<std::string>& seen_names() const { return seen_names_; }

 private:
  bool wants(const ggml_tensor* tensor, int* layer) const;
  void take(const ggml_tensor* tensor, int layer, int stream);
  void take_qk(const ggml_tensor* attention, int layer, int stream);
  // Checks one head's full row over n_kv cells (mass only on cells <= position,
  // sum 1) and stores its span; false (with the error kept) when it breaks.
  bool store_row(const std::string& name, const float* row, int64_t n_kv, int64_t position, int token,
                 std::size_t head_index);
  void fail(std::string message);

  AttentionRoute route_;
  std::vector<AttentionHead> heads_;
  std::vector<int> layers_;  // distinct layers of heads_, ascending
  int column_begin_ = 0;
  int column_end_ = 0;

  int first_position_ = 0;
  int n_tokens_ = 0;
  std::vector<int> tokens_done_;  // per entry of layers_: tokens captured in this decode
  std::vector<float> values_;     // [token][head][column]
  std::vector<float> scratch_;
  std::vector<char> q_bytes_, k_bytes_, mask_bytes_;  // device copies (kQk, off-host buffers only)
  std::vector<float> keys_;                           // one KV head's K rows as F32, [cell][dim]
  std::string error_;
  std::vector<std::string> seen_names_;
};

}  // namespace earshot::llm

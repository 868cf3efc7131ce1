// Internal: builders of the Whisper compute graphs (encoder + cross K/V, decoder
// step). They only describe the computation; the session allocates and runs it.
// Op order follows whisper.cpp's graphs so that results match libwhisper.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <vector>

#include "model/asr_decoder.h"
#include "model/runtime/kv_cache.h"
#include "model/runtime/openblas_ops.h"
#include "model/whisper/model.h"

namespace earshot::whisper::detail {

// Graph nodes budget: the largest graphs (large-v3 decoder, 32 layers) stay far below.
inline constexpr int kMaxGraphNodes = 16384;

// Per-session persistent state (f16): cross K/V laid out per decoder layer, and the self-attention cache.
struct StateTensors {
  // Cross-attention keys, pre-scaled by head_dim^-1/4: per layer [n_state, n_audio_ctx].
  ggml_tensor* cross_k = nullptr;
  // Cross-attention values, transposed: per layer [n_audio_ctx, n_state].
  ggml_tensor* cross_v = nullptr;
  // Self-attention keys (pre-scaled) and values (transposed) of every sequence.
  const runtime::KvCache* self_kv = nullptr;
};

struct EncoderGraph {
  ggml_tensor* mel = nullptr;  // input [2 * n_audio_ctx, n_mels] f32
};

// How the encoder computes: ggml's kernels with whisper.cpp's explicit softmax
// (bit-identical to libwhisper with flash attention off), ggml's with the fused
// self-attention (ggml_flash_attn_ext), or OpenBLAS's sgemm for every product and
// the attention in f32 (runtime/openblas_ops.h; CPU only).
enum class EncoderKernels { kGgml, kGgmlFlash, kOpenBlas };

// Encoder over n_audio_ctx frames (1500 = 30 s), ending with the writes of every
// decoder layer's cross K/V into state.cross_k/cross_v. int8: a Q8_0 model's
// products on the int8 op (runtime::MatMul::int8; runtime::encoder_products).
EncoderGraph build_encoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model, const StateTensors& state,
                           int n_audio_ctx, EncoderKernels kernels, bool int8 = false);

struct DecoderGraphSpec {
  int n_sequences = 1;
  int first_sequence = 0;  // the graph runs sequences [first_sequence, first_sequence + n_sequences) of the cache
  int n_tokens = 1;        // appended per sequence
  int n_past = 0;          // tokens already in every sequence's cache
  int n_audio_ctx = 1500;
  // Positions (0..n_tokens-1) whose logits are computed, the same for every sequence.
  std::vector<int> logits_positions;
  int n_vocab_logits = 0;  // rows of the token embedding projected: ids [0, n_vocab_logits)
  bool want_attention = false;
  // n_sequences * n_tokens token ids, sequence-major; empty when the graph is only
  // built to reserve memory.
  std::vector<int32_t> tokens;
};

// A session's checked decode request: the graph spec of its step, and whether the
// step computes sequence 0 only for identical beams (a shared prompt).
struct PreparedStep {
  DecoderGraphSpec spec;
  bool share = false;
};

// The decoder step of one or several sessions as one graph (batch_graph.cpp): the
// matrix products over every row of every part, attention per part against that
// part's own caches. A session's lone step is this graph with one part.
struct BatchPart {
  const StateTensors* state = nullptr;
  const DecoderGraphSpec* spec = nullptr;
};

struct BatchedDecoderGraph {
  // Input I32 holding every integer the step reads, to be set to index_values:
  // token ids, positions, the hidden-state rows to project. One tensor is one
  // upload per step: on a GPU one host-device synchronisation instead of several
  // (measured: the step's gap to libwhisper).
  ggml_tensor* indices = nullptr;
  std::vector<int32_t> index_values;
  ggml_tensor* masks = nullptr;  // F32 input (every part's causal mask), to be set to mask_values; null if none
  std::vector<float> mask_values;
  struct Part {
    ggml_tensor* logits = nullptr;  // [n_vocab_logits, columns...] of the part's vocabulary group
    size_t logits_offset = 0;       // bytes into logits where the part's n_seq * n_positions columns start
    // Per decoder layer: output [n_audio_ctx, n_tokens, n_head, n_sequences], the
    // softmaxed cross-attention, where the layer has alignment heads and the spec
    // wants attention; null otherwise.
    std::vector<ggml_tensor*> cross_attention;
  };
  std::vector<Part> parts;
};

// The causal mask of a step of n_tokens after n_past ([n_kv, n_tokens], -inf above
// the diagonal), appended to `out`.
void append_causal_mask(std::vector<float>& out, int n_past, int n_tokens);

// Reads a computed step's outputs (logits from byte `logits_offset`, the alignment
// heads' attention) into a DecodeResult, waiting for the backend once.
DecodeResult read_step_outputs(ggml_backend_t backend, const Model& model, const DecoderGraphSpec& spec,
                               ggml_tensor* logits, size_t logits_offset,
                               const std::vector<ggml_tensor*>& cross_attention);

// Nodes the batched graph needs, for the graph's allocation.
int batched_graph_size(const Model& model, int n_parts);

// kernels: the weight products' (runtime::step_products over the step's rows):
// kGgml, ggml's (bit for bit libwhisper's); kAuto and kOpenBlas, the few-row op
// (runtime/rows_ops.h) on a step's rows, OpenBLAS on a prompt's many.
BatchedDecoderGraph build_batched_decoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model,
                                          const std::vector<BatchPart>& parts,
                                          runtime::CpuKernels kernels = runtime::CpuKernels::kGgml);

}  // namespace earshot::whisper::detail

// Voxtral's two graphs, built on the caller's context: the encoder over a run
// of slots of one stream (conv stem, the causal transformer against the
// stream's encoder ring, the projector: one audio embedding per slot), and the
// decoder over positions of one or more streams (each its own ring, mask and
// delay; the matrices read once for all of them), ending in each part's logits
// for its last position.
#pragma once

#include <ggml.h>

#include <span>
#include <vector>

#include "model/voxtral/kv_ring.h"
#include "model/voxtral/model.h"

namespace earshot::voxtral {

// Which kernels the graphs' products use where the graph runs on the CPU.
struct GraphKernels {
  bool cpu = true;
  // A Q8_0 weight's products on the int8 op (runtime/q8_gemm.h) where the CPU runs it,
  // at any number of rows: the encoder's (its values do not depend on the rows, so a
  // stream encoded slot by slot still equals the whole file at once). The decoder's
  // one row per stream stays on the few-row kernels.
  bool int8 = false;
  // An F16, F32, Q8_0, Q4_K or Q6_K weight's products on the few-row op
  // (runtime/rows_ops.h), at any number of rows: the decoder's (the encoder's
  // builder ignores it). A step reads each weight once for all its streams'
  // rows, and a row's values equal its lone product's, so a stream's batched step
  // equals its lone one. Other types (Q5_K) stay on ggml's kernels.
  bool rows = true;
  // The attention of a graph of many query rows (the encoder's, a prompt's) on
  // OpenBLAS (runtime::blas_masked_attention: scores and values by sgemm, an exact
  // f32 softmax) where it loads; a step's row keeps ggml's flash attention.
  bool openblas_attention = false;
};

struct EncoderGraph {
  ggml_tensor* mel = nullptr;         // in: [8S + 2, n_mels] f32, time contiguous: the 2 frames before, then 8S new
  ggml_tensor* conv0_prev = nullptr;  // in: [enc_d] f32, the first conv's output frame before these
  ggml_tensor* positions = nullptr;   // in: [4S] i32, the frames' positions since the context began
  ggml_tensor* mask = nullptr;        // in: [capacity, 4S] f16 (KvRing::mask)
  ggml_tensor* audio = nullptr;       // out: [d, S] f32, one embedding per slot
  ggml_tensor* conv0_last = nullptr;  // out: [enc_d] f32, the first conv's last output frame
};

// The encoder over `slots` slots; `ring` must have room for 4 x slots frames (KvRing::reserve).
EncoderGraph build_encoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model, const KvRing& ring, int slots,
                           GraphKernels kernels);

// One stream's part of a decoder graph: `n` positions stored after those its ring holds.
struct DecoderPart {
  const KvRing* ring = nullptr;
  int n = 1;
  int delay = 6;  // slots: which ada-norm scales its rows get
};

struct DecoderGraph {
  ggml_tensor* tokens = nullptr;     // in: [sum n] i32, each position's input token
  ggml_tensor* audio = nullptr;      // in: [d, sum n] f32, each position's audio embedding
  ggml_tensor* positions = nullptr;  // in: [sum n] i32
  ggml_tensor* scales = nullptr;     // in: [d, parts, n_layer] f32, 1 + ada per part and layer
  std::vector<ggml_tensor*> masks;   // in: per part [capacity, n] f16
  ggml_tensor* logits = nullptr;     // out: [n_vocab, parts] f32, each part's last position
};

// Several parts only when each adds one position (the streams' steps); one part
// may add many (a prompt).
DecoderGraph build_decoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model,
                           std::span<const DecoderPart> parts, GraphKernels kernels);

// Upper bounds of the graphs' node counts (for GraphRunner::begin).
int encoder_graph_nodes(const Hparams& hp);
int decoder_graph_nodes(const Hparams& hp, int parts);

}  // namespace earshot::voxtral

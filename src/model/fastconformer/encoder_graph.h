// The FastConformer encoder's ggml graph pieces, shared by the offline Encoder
// (encoder.cpp) and the cache-aware StreamingEncoder (streaming_encoder.cpp) so
// that both compute the same functions. Internal to the family.
#pragma once

#include <ggml.h>

#include "model/fastconformer/model.h"

namespace earshot::fastconformer::detail {

// A layer's streaming caches: inputs (null: none yet / the causal zero padding)
// and the next ones the graph computes (filled in by build_layer).
struct LayerCaches {
  ggml_tensor* att_in = nullptr;   // [d, n]: the last n attention inputs (after norm_self_att)
  ggml_tensor* conv_in = nullptr;  // [kernel - 1, d]: the last depthwise conv inputs (after the GLU), time-major
  int att_keep = 0;                // how many attention inputs the next cache keeps
  ggml_tensor* att_next = nullptr;
  ggml_tensor* conv_next = nullptr;
};

// The dw_striding subsampling (causal or symmetric as the file says), the output
// linear and xscaling: mel [n_mels, frames] -> [d, encoder frames].
// f16: ggml_conv_2d's f16 im2col (libparakeet's), else f32 throughout.
ggml_tensor* build_subsampling(ggml_context* ctx, const Model& m, ggml_tensor* mel, bool f16);

// One conformer layer on x [d, T]. pos_emb: [d, T_k + T - 1] relative positions
// T_k - 1 ... -(T - 1), T_k = T plus the cached frames; mask: null or [T_k, T]
// f32 (0 or -inf). caches: null offline.
ggml_tensor* build_layer(ggml_context* ctx, const Model& m, const Layer& l, ggml_tensor* x, ggml_tensor* pos_emb,
                         ggml_tensor* mask, float bn_eps, LayerCaches* caches);

}  // namespace earshot::fastconformer::detail

// The FastConformer's conformer blocks as ggml graph pieces: the subsampling,
// the macaron FFN, relative-position attention, the convolution module and a
// whole layer. The offline Encoder (encoder.cpp), the cache-aware streaming step
// (streaming_graph.cpp, one stream or several batched) and every model built on
// a FastConformer encoder (Sortformer's) call these, so that all compute the
// same functions.
#pragma once

#include <ggml.h>

#include "model/fastconformer/model.h"
#include "model/runtime/graph_ops.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::fastconformer {

using runtime::layer_norm;
using runtime::linear;

// Half-step macaron FFN: x + 0.5 * W2 silu(W1 LN(x)), on x [d, T] (any number of
// columns: every product is per column).
// b1, b2: the linears' biases (null: none).
ggml_tensor* half_ffn(ggml_context* ctx, ggml_tensor* x, ggml_tensor* nw, ggml_tensor* nb, ggml_tensor* w1,
                      ggml_tensor* w2, float eps, runtime::MatMul mm = {}, ggml_tensor* b1 = nullptr,
                      ggml_tensor* b2 = nullptr);

// Relative-position attention of G sequences of one shape from their
// projections: q [dh, H, Tq, G], k and v [dh, H, Tk, G] (the query frames are
// the keys' last Tq), p [dh, H, Tk + Tq - 1] (linear_pos of positions Tk - 1 ...
// -(Tq - 1), shared); mask null or [Tk, Tq] f32. Returns the heads concatenated,
// [d, Tq * G] (sequence-major), before linear_out; each sequence's values are
// those it has alone.
ggml_tensor* attention_heads(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* q, ggml_tensor* k,
                             ggml_tensor* v, ggml_tensor* p, ggml_tensor* mask);

// The convolution module's first half: LayerNorm, pointwise_conv1 and the GLU, [d, T].
ggml_tensor* conv_glu(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* x, runtime::MatMul mm = {});
// The depthwise conv over time of h [d, T, G] (the GLU output of G sequences of
// T frames): their left context is `cache` ([kernel - 1, d, G] time-major, the
// previous inputs) when given, else the padding the file says (causal: kernel - 1
// zeros on the left). With next_cache, the last kernel - 1 inputs ([kernel - 1, d,
// G]) for the next chunk. Returns [d, T, G].
ggml_tensor* depthwise_conv(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* h, ggml_tensor* cache,
                            ggml_tensor** next_cache);
// The convolution module's second half: the norm, SiLU and pointwise_conv2.
ggml_tensor* conv_out(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* h, float bn_eps,
                      runtime::MatMul mm = {});

// The layer's biases, where the file has them (Layer::*_b): the conv module's
// pointwise and depthwise convs are biased inside conv_glu, depthwise_conv and
// conv_out; the attention's linear_q/k/v/out by the callers.

// The dw_striding subsampling's convolutions (causal or symmetric as the file
// says): mel [n_mels, frames, 1, N] (N sequences of as many frames) ->
// [subsampled bins * channels, encoder frames * N], sequence-major, each
// sequence's values those it has alone. f16: ggml_conv_2d's f16 im2col
// (libparakeet's), else f32 throughout (channels first in memory), the
// first and pointwise convs' products on mm.
ggml_tensor* build_subsampling_convs(ggml_context* ctx, const Model& m, ggml_tensor* mel, bool f16,
                                     runtime::MatMul mm = {});
// The subsampling's output linear and xscaling: [bins * channels, T] -> [d, T].
ggml_tensor* subsampling_out(ggml_context* ctx, const Model& m, ggml_tensor* x, runtime::MatMul mm = {});
// Both: mel [n_mels, frames] -> [d, encoder frames].
ggml_tensor* build_subsampling(ggml_context* ctx, const Model& m, ggml_tensor* mel, bool f16, runtime::MatMul mm = {});

// One offline conformer layer on x [d, T]. pos_emb: [d, 2T - 1] relative
// positions T - 1 ... -(T - 1); mask: null or [T, T] f32 (0 or -inf). mm: the
// products' kernels; on OpenBLAS the attention is runtime::blas_relpos_attention,
// else attention_heads.
ggml_tensor* build_layer(ggml_context* ctx, const Model& m, const Layer& l, ggml_tensor* x, ggml_tensor* pos_emb,
                         ggml_tensor* mask, float bn_eps, runtime::MatMul mm = {});

}  // namespace earshot::fastconformer

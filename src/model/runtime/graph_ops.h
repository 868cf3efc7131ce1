// Graph building blocks the model families share (llama.cpp's llama-graph.cpp in
// small): each family's graph file composes these with its own wiring.
#pragma once

#include <ggml.h>

#include "model/runtime/openblas_ops.h"

namespace earshot::runtime {

// Layer normalisation with a learned scale and shift: (x - mean) / sqrt(var + eps) * w + b.
inline ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b, float eps) {
  return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
}

// A linear layer, w x (+ b when the layer has a bias), on the product `mm` chooses.
inline ggml_tensor* linear(ggml_context* ctx, MatMul mm, ggml_tensor* w, ggml_tensor* b, ggml_tensor* x) {
  return b ? mm.affine(ctx, w, x, b) : mm(ctx, w, x);
}

// How full_attention computes: on OpenBLAS (blas_attention, exact f32 softmax
// per block of queries), fused (ggml_flash_attn_ext, never materialising the
// scores), or as explicit products and a softmax; keys and values are cast to
// `kv` for the last two (f16 halves their reads; f32 keeps them exact).
struct AttentionKernel {
  bool openblas = false;
  bool flash = false;
  ggml_type kv = GGML_TYPE_F32;
};

// Scaled dot-product attention of every query over every key, no mask, per head:
// q [D, Tq], k and v [D, Tk] projections (D = n_head x head_dim, head h in rows
// h * head_dim...), softmax(q_h k_h^T * scale) v_h, the heads concatenated back
// [D, Tq] for the output projection. `scale` is 1 / sqrt(head_dim) on OpenBLAS
// (blas_attention's own). The Whisper encoder's and Sortformer's Transformer
// layers; the conformers' relative-position attention is their family's.
inline ggml_tensor* full_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, int n_head,
                                   float scale, AttentionKernel kernel) {
  if (kernel.openblas) return blas_attention(ctx, q, k, v, n_head);
  const int64_t d = q->ne[0], head_dim = d / n_head, tq = q->ne[1], tk = k->ne[1];
  auto as_kv = [&](ggml_tensor* t) { return kernel.kv == t->type ? t : ggml_cast(ctx, t, kernel.kv); };
  ggml_tensor* Q = ggml_permute(ctx, ggml_reshape_3d(ctx, q, head_dim, n_head, tq), 0, 2, 1, 3);  // [dh, Tq, H]
  ggml_tensor* K = ggml_permute(ctx, as_kv(ggml_reshape_3d(ctx, k, head_dim, n_head, tk)), 0, 2, 1, 3);
  if (kernel.flash) {
    ggml_tensor* V = ggml_permute(ctx, as_kv(ggml_reshape_3d(ctx, v, head_dim, n_head, tk)), 0, 2, 1, 3);
    ggml_tensor* out = ggml_flash_attn_ext(ctx, Q, K, V, nullptr, scale, 0.0f, 0.0f);  // [dh, H, Tq]
    return ggml_reshape_2d(ctx, out, d, tq);
  }
  ggml_tensor* scores = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, K, Q), nullptr, scale, 0.0f);     // [Tk, Tq, H]
  ggml_tensor* vt = ggml_permute(ctx, ggml_reshape_3d(ctx, v, head_dim, n_head, tk), 1, 2, 0, 3);  // [Tk, dh, H]
  vt = kernel.kv == v->type ? ggml_cont(ctx, vt) : ggml_cast(ctx, vt, kernel.kv);
  ggml_tensor* out = ggml_mul_mat(ctx, vt, scores);  // [dh, Tq, H]
  return ggml_cont_2d(ctx, ggml_permute(ctx, out, 0, 2, 1, 3), d, tq);
}

}  // namespace earshot::runtime

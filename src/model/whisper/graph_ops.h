// Internal: small ggml building blocks shared by the Whisper graphs.
#pragma once

#include <ggml.h>

#include "model/runtime/openblas_ops.h"

namespace earshot::whisper::detail {

inline constexpr float kLayerNormEps = 1e-5f;

// Pre-LN as Whisper uses it: normalise, then scale and shift.
inline ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* weight, ggml_tensor* bias) {
  return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, kLayerNormEps), weight), bias);
}

// A graph's matrix product: ggml_mul_mat, or OpenBLAS's sgemm in ggml's threads.
struct MatMul {
  bool openblas = false;
  ggml_tensor* operator()(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) const {
    return openblas ? runtime::blas_mul_mat(ctx, a, b) : ggml_mul_mat(ctx, a, b);
  }
  // a b + bias, then GELU if asked: one op on OpenBLAS (the epilogue of each thread's
  // block), ggml_add (and ggml_gelu) after the product otherwise, as whisper.cpp.
  ggml_tensor* affine(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias, bool gelu = false) const {
    if (openblas) {
      return runtime::blas_mul_mat(ctx, a, b, bias, gelu ? runtime::Activation::kGelu : runtime::Activation::kNone);
    }
    ggml_tensor* out = ggml_add(ctx, ggml_mul_mat(ctx, a, b), bias);
    return gelu ? ggml_gelu(ctx, out) : out;
  }
};

// The residual GELU MLP that ends every Whisper layer, encoder's and decoder's
// alike: x + MLP(LN(x)).
template <typename Layer>
ggml_tensor* residual_mlp(ggml_context* ctx, const Layer& layer, ggml_tensor* x, MatMul mul_mat = {}) {
  ggml_tensor* cur = layer_norm(ctx, x, layer.mlp_ln_w, layer.mlp_ln_b);
  cur = mul_mat.affine(ctx, layer.mlp_0_w, cur, layer.mlp_0_b, /*gelu=*/true);
  cur = mul_mat.affine(ctx, layer.mlp_1_w, cur, layer.mlp_1_b);
  return ggml_add(ctx, cur, x);
}

// The first n_vocab rows of the token embedding (the logits' matrix); all of it
// when n_vocab is 0 or not smaller.
inline ggml_tensor* vocabulary_rows(ggml_context* ctx, ggml_tensor* token_emb, int64_t n_vocab) {
  if (n_vocab <= 0 || n_vocab >= token_emb->ne[1]) return token_emb;
  return ggml_view_2d(ctx, token_emb, token_emb->ne[0], n_vocab, token_emb->nb[1], 0);
}

}  // namespace earshot::whisper::detail

// Internal: small ggml building blocks shared by the Whisper graphs.
#pragma once

#include <ggml.h>

#include "model/runtime/graph_ops.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::whisper::detail {

inline constexpr float kLayerNormEps = 1e-5f;

// Pre-LN as Whisper uses it: normalise, then scale and shift.
inline ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* weight, ggml_tensor* bias) {
  return runtime::layer_norm(ctx, x, weight, bias, kLayerNormEps);
}

using runtime::MatMul;

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

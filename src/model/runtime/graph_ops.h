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

}  // namespace earshot::runtime

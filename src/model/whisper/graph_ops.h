// Internal: small ggml building blocks shared by the Whisper graphs.
#pragma once

#include <ggml.h>

namespace earshot::whisper::detail {

inline constexpr float kLayerNormEps = 1e-5f;

// Pre-LN as Whisper uses it: normalise, then scale and shift.
inline ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* weight, ggml_tensor* bias) {
  return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, kLayerNormEps), weight), bias);
}

}  // namespace earshot::whisper::detail

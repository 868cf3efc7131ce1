// A product with a few activation rows (a decoding step) against float weights,
// as a ggml custom op on the CPU: each of the graph's threads streams its share of
// the weight's rows from memory once, converting f16 to f32 in registers, and
// multiplies every activation row by each. Such a product is bound by reading the
// weight; ggml's own rounds the activations to f16 first (f16 dot products), this
// one keeps them in f32.
#pragma once

#include <ggml.h>

namespace earshot::runtime {

// The most activation rows gemv_mul_mat takes (beyond, the weight is worth
// converting once per chunk for sgemm: runtime::blas_mul_mat).
inline constexpr int64_t kGemvMaxRows = 7;

// Whether gemv_mul_mat takes this product: a 2-D weight `a` [K, I] of type F16 or
// F32 with contiguous rows, and b [K, J] f32 with contiguous rows, 1 <= J <=
// kGemvMaxRows (any row strides).
bool gemv_supports(const ggml_tensor* a, const ggml_tensor* b);

// ggml_mul_mat(ctx, a, b) for what gemv_supports takes: [I, J] f32, out[j][i] =
// a_i . b_j accumulated in f32. Only for graphs computed on the CPU backend; throws
// earshot::Error(kInternal) for operands gemv_supports refuses.
ggml_tensor* gemv_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

}  // namespace earshot::runtime

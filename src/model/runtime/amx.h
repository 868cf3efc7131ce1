// Quantised weight products on Intel AMX: ggml's AMX kernels (ggml-cpu/amx), which
// multiply int8 tiles, reach 260-380 GFLOP/s on one Sapphire Rapids core pair where
// ggml's ordinary Q8_0 kernels reach 25-50 and OpenBLAS's f32 sgemm 110-250
// (earshot-bench-model and earshot-bench-parakeet print the rates of the machine).
//
// ggml runs them for a product whose first operand lives in its AMX buffer type,
// where the weights are repacked into tiles when loaded. The kernel computes what
// ggml's ordinary product of a quantised weight computes (the activations rounded
// to the weight's 8-bit block type, integer dot products per block, f32 scales):
// only the order of the f32 additions differs. It reads the weight only as a product
// operand, so a family places in that buffer just the weights its graphs use that
// way (runtime::ModelWeights::load's `product_weight`), and every such product goes
// through mul_mat() below: ggml's kernel neither broadcasts the weight over the
// activations' third and fourth dimensions nor reads strided activations.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <array>
#include <cstdint>
#include <string>

namespace earshot::runtime {

// ggml's AMX buffer type, or null where this build, this CPU or its kernel has no
// AMX (ggml compiles the kernels for -march=native CPUs with AMX-INT8 and asks the
// kernel for the tile state on first use).
ggml_backend_buffer_type_t amx_buffer_type();

// "AMX-INT8 (ggml's AMX kernels) for quantised weights", or why there is none.
std::string amx_status();

// Whether a weight of this type and shape can live in the AMX buffer: a 2-D matrix of
// a type ggml has AMX kernels for (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS), rows a
// multiple of the kernels' block (32 values; 256 for the k-quants), and a multiple of
// 32 rows (output features).
bool amx_can_hold(ggml_type type, int n_dims, const std::array<int64_t, 4>& ne);

// Whether t (or the tensor it views) lives in the AMX buffer.
bool in_amx_buffer(const ggml_tensor* t);

// ggml_mul_mat(ctx, a, b) for a weight `a` [K, N] and activations b [K, ...]: when `a`
// lives in the AMX buffer, b is made contiguous f32 and 2-D first, and the result
// [N, ...] shaped as b was.
ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

}  // namespace earshot::runtime

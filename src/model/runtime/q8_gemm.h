// A Q8_0 weight's product with many activation rows (a prompt, an encoder's
// frames) on the CPU's int8 dot products, as two ggml custom ops: the activation
// rows quantised to int8 once (per block of 32, d = max |x| / 127, q = round(x /
// d), ties to even; d kept in f32), then each thread multiplies its panels of 32
// weight rows by every activation row.
//
// ggml's own Q8_0 product and runtime::rows_mul_mat (rows_ops.h, built for a
// step's few rows) run their int8 dot products along K, so each output needs a
// horizontal sum and each block's float work is done per output; here the
// vector lanes are 16 output features instead. A panel's weights are laid out for
// vpdpbusd once per product (4 consecutive k of 16 rows in a 64-byte vector,
// stored as q + 128: vpdpbusd multiplies unsigned by signed bytes, so the
// activations' 128 * sum(q) is subtracted), kept in cache while every activation
// row passes; a block's exact integer sums are scaled by d_w * d_x and added in
// f32, one block after another.
//
// Values: each output is sum over blocks b (ascending) of fma(float(isum_b),
// d_w,b * d_x,b, acc), then + bias: one order, whatever the number of rows, the
// threads or where a row or feature falls in a tile (a row's values equal its
// lone product's, and the same on any thread count). They differ from ggml's Q8_0
// product (which rounds d to f16 and sums in its own order) by rounding. The
// scalar path computes the same sums in the same order, bit for bit.
//
// The fast path needs AVX512-VNNI (Zen 4 and 5, Ice Lake, Sapphire Rapids);
// q8_gemm_available() says whether this CPU runs it (within the kernel cap,
// cpu_isa.h). Where it does not, callers keep the product they had.
#pragma once

#include <ggml.h>

#include <cstdint>

#include "model/runtime/cpu_isa.h"

namespace earshot::runtime {

// Whether the op runs on its AVX512-VNNI kernels here (kernel_path() is kAvx512Vnni).
bool q8_gemm_available();

// Activation rows from which a product is worth the op: below, laying out the
// weight's panels costs more than it saves (Zen 5, 2 threads, the 0.6B streaming
// transducer's shapes: 8 rows 275-280 GFLOP/s against ggml's 176-196 and the
// few-row op's 218-244; 16 rows 455-470 against 190-205 and 237-239).
inline constexpr int64_t kQ8GemmMinRows = 16;

// Whether q8_mul_mat takes these operands: a 2-D Q8_0 weight a [K, I] whose rows
// are Q8_0's own blocks (contiguous, in a plain host buffer: not on AMX or in
// ggml's repacked layouts), b [K, J] f32 with contiguous rows (any row stride),
// bias null or I f32 values.
bool q8_gemm_supports(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias = nullptr);

// Whether the op takes these operands and they have rows enough to gain by it
// (q8_gemm_supports, and b has at least kQ8GemmMinRows rows).
bool q8_gemm_takes(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias = nullptr);

// ggml_mul_mat(ctx, a, b) (+ bias[i] on every row) for what q8_gemm_supports
// takes: [I, J] f32, as two nodes: b's rows quantised, then the product. A
// product of the b the thread's last call quantised in this graph takes that
// node again (a layer's query, key and value quantise their input once). Only
// for graphs computed on the CPU backend; throws earshot::Error(kInternal) for
// operands it refuses.
ggml_tensor* q8_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias = nullptr);

namespace q8 {

// Activation rows quantised for the product: per row, K int8 values, then nb = K /
// 32 f32 scales d, then nb int32 corrections (-128 * the block's sum of q); rows
// `stride` bytes apart (a multiple of 64).
int64_t quantised_row_bytes(int64_t K);
void quantise_rows(CpuPath path, const float* x, int64_t ldx, int64_t K, int64_t j0, int64_t j1, char* out);

// Weight rows [i0, i1) of w (Q8_0, row stride ldw bytes) times the J quantised
// rows (stride quantised_row_bytes(K)): out[j * ldo + i] (+ bias[i]). One thread's
// share: i0 a multiple of 32.
void product(CpuPath path, const void* w, int64_t ldw, const char* xq, int64_t K, int64_t J, float* out, int64_t ldo,
             const float* bias, int64_t i0, int64_t i1);

// The AVX512-VNNI kernels (q8_gemm_x86.cpp).
void quantise_rows_avx512(const float* x, int64_t ldx, int64_t K, int64_t j0, int64_t j1, char* out);
void product_avx512(const void* w, int64_t ldw, const char* xq, int64_t K, int64_t J, float* out, int64_t ldo,
                    const float* bias, int64_t i0, int64_t i1);

}  // namespace q8
}  // namespace earshot::runtime

// A weight's product with the few activation rows of a step (a decoder token, a
// streaming chunk, a batch of streams' chunks: 1 to a few hundred rows) as a ggml
// custom op on the CPU, near what the machine does at every row count: bound by
// reading the weight at a few rows (each thread streams its share of the weight
// once, the next rows prefetched), by the vector units at more (tiles of weight
// rows x activation rows in registers, the weight block kept in cache while every
// activation row passes). Weights stay in their file's type:
//  - F16 and F32: converted to f32 in registers; the activations stay f32 (ggml's
//    F16 product rounds them to f16);
//  - Q8_0: each activation row is quantised to Q8_0 as ggml's product quantises it,
//    each block's integer dot product is exact (AVX512-VNNI or AVX-VNNI where the
//    CPU has it, else AVX2's byte products), scaled by both blocks' scales in f32;
//  - Q4_K: each activation row quantised to Q8_K as ggml's Q4_K product quantises
//    it; per super-block of 256 the sub-blocks' scaled integer sums are exact,
//    then scaled by d_w * d_x (the mins' term by dmin_w * d_x) in f32. Each weight
//    super-block is unpacked once for all the tile's activation rows;
//  - Q6_K: the same Q8_K rows; per super-block each group of 16's integer sum of
//    (q_w - 32) q_x times its int8 scale, exact, then scaled by d_w * d_x in f32.
// Every output is one fixed-order dot product, whatever the number of rows, the
// threads or where its row falls in a tile: a row's values equal its lone
// product's bit for bit (a batched step equals its lone steps). Paths: AVX-512,
// AVX2 (each with its int8 form) and scalar, picked by runtime::kernel_path().
#pragma once

#include <ggml.h>

#include <cstdint>

namespace earshot::runtime {

// Whether rows_mul_mat takes this product: a 2-D weight `a` [K, I] of type F16,
// F32, Q8_0, Q4_K or Q6_K with contiguous rows (not on AMX: runtime/amx.h), and b [K, J] f32
// with contiguous rows (any row stride), J >= 1; bias null or I f32 values.
bool rows_supports(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias = nullptr);

// ggml_mul_mat(ctx, a, b) (+ bias[i] on every row) for what rows_supports takes:
// [I, J] f32. Only for graphs computed on the CPU backend; throws
// earshot::Error(kInternal) for operands rows_supports refuses.
ggml_tensor* rows_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias = nullptr);

// The product on plain arrays, one thread's share (rows [i0, i1) of the weight):
// what the op runs on each of ggml's threads. w: I rows of K values of `type`, row
// stride ldw bytes; x: J rows of K floats, stride ldx floats; out: J rows of I
// floats, stride ldo floats; bias: I floats or null.
void rows_product(ggml_type type, const void* w, int64_t ldw, const float* x, int64_t ldx, int64_t K, int64_t J,
                  float* out, int64_t ldo, const float* bias, int64_t i0, int64_t i1);

}  // namespace earshot::runtime

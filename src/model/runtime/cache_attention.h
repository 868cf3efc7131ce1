// A decoder step's attention over a long cache (Whisper's cross-attention over
// the encoder's frames) as two ggml custom ops on the CPU, for the few query
// rows of a step; ggml's softmax runs between them.
//
// key_scores: ggml's product computes each score as its own short dot product
// (a head's 64 values) ending in a horizontal sum, and rounds the queries to f16
// for an f16 cache; this op takes a block of 16 keys at a time, accumulates each
// key's products in the lanes of its own register and adds the 16 registers
// together in one fixed tree, so reading the cache, not the sums, bounds it. The
// queries stay f32. Threads split the keys (each reads its own stretch of the
// cache for every head). Paths: AVX-512, AVX2 and scalar, picked by
// runtime::kernel_path().
//
// head_values: each head's values (stored transposed: a row of frames per value)
// against that head's probabilities on the few-row op's kernels (rows_ops.h),
// the probabilities kept f32 (ggml's product rounds them to f16), written
// straight into the rows the output projection reads (no permute and copy).
//
// Both compute every output as one fixed-order sum whatever the number of
// threads, queries or where it falls in a block: a batched step's values equal
// its lone step's bit for bit.
#pragma once

#include <ggml.h>

#include <cstdint>

namespace earshot::runtime {

// Whether key_scores takes these operands: keys k [D, F, Hk, Sk] of type F16 or
// F32, each key's D values contiguous (any strides between keys, heads and
// groups), and queries q [D, T, H, S] f32 with contiguous values (any other
// strides), D a multiple of 16, H a multiple of Hk (grouped-query attention:
// query head h reads key head h / (H / Hk)), Sk 1 (the keys shared by the S
// groups of queries) or S (each group its own: libllama's KV streams).
bool key_scores_supports(const ggml_tensor* k, const ggml_tensor* q);

// ggml_mul_mat(ctx, k, q) for what key_scores_supports takes, with ggml's
// broadcast of the keys over the query heads: [F, T, H, S] f32. Only for graphs
// computed on the CPU backend; throws earshot::Error(kInternal) for operands it
// refuses.
ggml_tensor* key_scores(ggml_context* ctx, ggml_tensor* k, ggml_tensor* q);

// One block of n <= 16 keys against one query, on plain arrays (what the op runs;
// for tests and benchmarks): out[i] = k_i . q for the keys at k + i * ldk bytes
// (type F16 or F32), D values each, on the path runtime::kernel_path() picks.
void key_scores_block(ggml_type type, const void* k, int64_t ldk, int n, const float* q, int64_t D, float* out);

// Whether head_values takes these operands: values v [F, D, Hv, Sv] of type F16
// or F32 (each value's F frames contiguous, any strides between values, heads and
// groups) and probabilities p [F, T, H, S] f32, contiguous; H a multiple of Hv
// (head h reads value head h / (H / Hv)), Sv 1 or S (as key_scores' keys).
bool head_values_supports(const ggml_tensor* v, const ggml_tensor* p);

// ggml_cont_2d(ggml_permute(ggml_mul_mat(v, p), 0, 2, 1, 3), D * H, T * S) for
// what head_values_supports takes: [D * H, T * S] f32, each query's heads side by
// side. Only for graphs computed on the CPU backend; throws
// earshot::Error(kInternal) for operands it refuses.
ggml_tensor* head_values(ggml_context* ctx, ggml_tensor* v, ggml_tensor* p);

}  // namespace earshot::runtime

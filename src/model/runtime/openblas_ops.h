// Large products of a CPU graph computed by OpenBLAS's sgemm inside ggml's own
// compute threads.
//
// ggml's CPU kernels reach about 0.4-0.6 of what these cores do on the encoder's
// shapes (earshot-bench-model prints the ratio against OpenBLAS's sgemm in the same
// run); OpenBLAS reaches the cores' limit. These ops are ggml custom ops: each of the
// graph's threads runs a single-threaded sgemm on its own slice (split by rows of the
// larger side), so there is one thread team (ggml's), no oversubscription and no
// second pool to wake. Weights of any ggml type are converted to f32 by a node of
// the graph first (a transient buffer the graph allocator reuses), so a loaded model
// keeps its file's type in memory. Everything is f32 from there: the values differ
// from ggml's kernels (which round activations to f16 against f16 weights) by
// rounding, and are closer to the f32 model.
//
// OpenBLAS is loaded with dlopen on first use (Debian's libopenblas0), with one thread
// per call (OPENBLAS_NUM_THREADS=1 when unset) and, when OPENBLAS_CORETYPE is unset,
// the core its CPU features call for: OpenBLAS 0.3.21 does not know recent Xeons and
// would fall back to its generic Prescott kernels, a quarter of the rate.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <string>
#include <string_view>

#include "model/runtime/amx.h"
#include "model/runtime/q8_gemm.h"
#include "model/runtime/rows_ops.h"

namespace earshot::runtime {

// Which kernels run a CPU graph's large products (the Whisper encoder's).
enum class CpuKernels {
  kAuto,      // on the CPU: quantised weights on ggml's AMX kernels where the CPU has
              // AMX (runtime/amx.h), the rest on OpenBLAS where it loads; else ggml's
  kGgml,      // ggml's own: bit-identical to libwhisper where earshot's graphs are
  kOpenBlas,  // OpenBLAS's sgemm (an error where it cannot load)
};

// "auto", "ggml", "openblas"; throws earshot::Error(kInvalidArgument) naming `label`.
CpuKernels parse_cpu_kernels(std::string_view text, std::string_view label);
std::string_view to_string(CpuKernels kernels);

// The OpenBLAS core (OPENBLAS_CORETYPE) whose kernels this CPU's features call for:
// "SkylakeX" (AVX-512), "Haswell" (AVX2 + FMA), or null. OpenBLAS 0.3.21 picks its
// generic Prescott kernels on CPUs it does not know (recent Xeons), a quarter of the rate.
const char* openblas_core_for_this_cpu();

// Whether OpenBLAS is loaded (loads it on the first call).
bool openblas_available();
// "OpenBLAS 0.3.21 ... (core SkylakeX)", or why it is not available.
std::string openblas_status();
// The core whose kernels OpenBLAS runs ("SkylakeX", "Haswell"; OPENBLAS_CORETYPE
// when set), "" when it is not available; and whether those are AVX-512 kernels.
std::string openblas_core();
bool openblas_runs_avx512();

// kAuto to kOpenBlas or kGgml; kOpenBlas off the CPU or without OpenBLAS throws
// earshot::Error(kUnsupported) with the reason.
CpuKernels resolve_cpu_kernels(CpuKernels requested, bool on_cpu);

// Whether a model's quantised product weights go to ggml's AMX kernels: kAuto, on
// the CPU (device null or the CPU), where amx_buffer_type() exists.
bool amx_wanted(CpuKernels requested, ggml_backend_dev_t device);

enum class Activation { kNone, kGelu };

// ggml_mul_mat(ctx, a, b) for 2-D a [K, I] (any type ggml can convert to f32, rows
// contiguous) and b [K, J] (f32 or convertible): [I, J] f32, out[j][i] = a_i . b_j;
// then, while each thread's block is in cache, + bias[i] (bias: I values, or null)
// and the activation (kGelu: ggml_gelu's tanh approximation, as whisper.cpp's).
// Only for graphs computed on the CPU backend. A weight `a` on AMX (runtime/amx.h)
// goes to mul_mat instead, then ggml_add and ggml_gelu.
ggml_tensor* blas_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias = nullptr,
                          Activation act = Activation::kNone);

// Multi-head attention without a mask: q [D, Nq], k and v [D, Nk] (f32, rows
// contiguous; D = n_head x head_dim, head h at columns h*head_dim), out [D, Nq] f32
// with out_h = softmax(q_h k_h^T / sqrt(head_dim)) v_h. Exact softmax in f32 (the row
// max subtracted), computed per head and block of 256 queries so the scores stay in
// cache.
ggml_tensor* blas_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, int n_head);

// Masked grouped-query attention over the views a graph holds (libllama's KV cache:
// earshot's patch to libllama hands them over): q [d, T, H, S] f32 (rows of d
// contiguous), k [d, n_kv, Hk, S] and v of any type ggml converts to f32 (v as
// [n_kv, d, Hk, S] with v_trans, a cache that stores V transposed; else [d, n_kv,
// Hk, S]), mask [n_kv, >= T, 1, S] f32 (0 or -inf) or null; S streams (libllama's
// KV streams of several sequences, each attending to its own cells; 1 for one);
// H a multiple of Hk (query head h reads KV head h / (H / Hk)). out [d * H, T *
// S] f32, stream s's rows from s*T, head h at columns h*d: softmax(scale q_h k^T
// + mask) v, an exact f32 softmax. Throws earshot::Error(kInternal) for other
// shapes, types or strides.
ggml_tensor* blas_masked_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, bool v_trans,
                                   ggml_tensor* mask, float scale);

// Relative-position multi-head attention (Transformer-XL's, as the FastConformer
// computes it) over T frames without caches: q, k, v [D, T] and p [D, 2T - 1] (the
// position projections of T - 1 ... -(T - 1)) f32 with contiguous rows; u and w [D]
// the content and position biases; mask null or [T, T] f32 (0 or -inf). out [D, T]:
// softmax(((q + u) k^T + shift((q + w) p^T)) / sqrt(head_dim) + mask) v per head, the
// shift pairing query i and key j with position i - j. Masked scores weigh exactly 0.
ggml_tensor* blas_relpos_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* p,
                                   ggml_tensor* u, ggml_tensor* w, ggml_tensor* mask, int n_head);

// A ggml_tensor's values as f32 (same shape; a no-op for f32).
ggml_tensor* to_f32(ggml_context* ctx, ggml_tensor* a);

// A graph's weight products: ggml's (runtime::mul_mat: on AMX for a weight loaded
// there), the OpenBLAS op, or the few-row op (runtime/rows_ops.h) for a step's
// rows. Graph builders take one (default: ggml's) so one builder serves every
// kernel. A weight on AMX stays on AMX either way (blas_mul_mat hands it to
// mul_mat, rows_supports refuses it): its bytes are in the AMX kernels' layout, and
// those kernels outrun sgemm.
struct MatMul {
  bool openblas = false;
  // The few-row op wherever it takes the operands (F16, F32, Q8_0, Q4_K, Q6_K weights), ahead of
  // the above; for a step's few rows, where reading the weight bounds the product.
  bool rows = false;
  // A Q8_0 weight's products of at least kQ8GemmMinRows rows on the int8 op
  // (runtime/q8_gemm.h), ahead of all the above.
  bool int8 = false;
  bool int8_takes(const ggml_tensor* a, const ggml_tensor* b, const ggml_tensor* bias = nullptr) const {
    return int8 && q8_gemm_takes(a, b, bias);
  }
  ggml_tensor* operator()(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) const {
    if (int8_takes(a, b)) return q8_mul_mat(ctx, a, b);
    if (rows && rows_supports(a, b)) return rows_mul_mat(ctx, a, b);
    return openblas ? blas_mul_mat(ctx, a, b) : mul_mat(ctx, a, b);
  }
  // a b + bias, then GELU if asked: one op on OpenBLAS (the epilogue of each thread's
  // block) and on the few-row and int8 ops (the bias only: GELU is ggml's, as
  // whisper.cpp's), ggml_add (and ggml_gelu) after the product otherwise, as whisper.cpp.
  ggml_tensor* affine(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias, bool gelu = false) const {
    if (int8_takes(a, b, bias)) {
      ggml_tensor* out = q8_mul_mat(ctx, a, b, bias);
      return gelu ? ggml_gelu(ctx, out) : out;
    }
    if (rows && rows_supports(a, b, bias)) {
      ggml_tensor* out = rows_mul_mat(ctx, a, b, bias);
      return gelu ? ggml_gelu(ctx, out) : out;
    }
    if (openblas) return blas_mul_mat(ctx, a, b, bias, gelu ? Activation::kGelu : Activation::kNone);
    ggml_tensor* out = ggml_add(ctx, mul_mat(ctx, a, b), bias);
    return gelu ? ggml_gelu(ctx, out) : out;
  }
};

// The products of an encoder's graph (many rows) under `requested` kernels on the
// CPU (on_cpu; off it ggml's): OpenBLAS where `requested` resolves to it, and under
// kAuto a Q8_0 weight's on the int8 op where the CPU has AVX512-VNNI (3-5x ggml's
// int8 kernels and OpenBLAS's sgemm at these shapes). Throws as resolve_cpu_kernels.
MatMul encoder_products(CpuKernels requested, bool on_cpu);

// The most activation rows a step's products run on the few-row op under
// CpuKernels::kAuto; beyond, on OpenBLAS where it loads (a batch of many streams'
// chunks, where sgemm's blocking pays).
inline constexpr int64_t kRowsOpMaxRows = 128;

// The products of a step of `n_rows` activation rows under `requested` kernels on
// the CPU (on_cpu; off it ggml's): kAuto, the few-row op up to kRowsOpMaxRows rows
// and beyond, OpenBLAS where it loads and a Q8_0 weight's on the int8 op where the
// CPU has it (encoder_products); kOpenBlas, OpenBLAS from `openblas_min_rows`
// rows and the few-row op below; kGgml, ggml's.
MatMul step_products(CpuKernels requested, bool on_cpu, int64_t n_rows, int64_t openblas_min_rows);

}  // namespace earshot::runtime

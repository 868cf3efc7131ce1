// What these cores can do, measured in the same run as the benchmark that prints
// its own rate beside it: OpenBLAS's sgemm at a product's shape and thread count
// (the practical compute limit), and the bandwidth of a streaming read on the same
// threads (the limit of a memory-bound step). The ratio ours / limit is the figure
// to drive up; a rate alone says nothing about the machine it ran on.
#pragma once

#include <ggml.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace earshot::tools {

// C[m x n] = A[m x k] * B[k x n]: m activation rows (frames, tokens), n outputs, k inputs.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  double flop() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

// "OpenBLAS 0.3.21 ... (core Haswell)": the library and the kernel it chose on this CPU.
std::string openblas_description();

// OpenBLAS picks its kernels when it loads, from OPENBLAS_CORETYPE or the CPU's
// identity; a release older than the CPU (Debian 12's 0.3.21 on a Sapphire Rapids
// Xeon) falls back to its generic Prescott (SSE3) kernels, a quarter of what the
// cores do, and on AMD's AVX-512 CPUs (Zen 4, Zen 5) it picks its AVX2 Haswell
// kernels, 0.6 of its SkylakeX ones there. earshot itself, loading OpenBLAS at run
// time, asks for the core runtime::openblas_core_for_this_cpu() names. Call first
// thing in main(): when the variable is unset and OpenBLAS chose another core than
// that one, this re-executes the program with OPENBLAS_CORETYPE set to it, so the
// tool measures the kernels earshot runs and the limit printed is the machine's;
// otherwise it returns. Each sgemm result is spot-checked anyway.
void use_openblas_best_kernels(char** argv);

// Best of `reps` timed calls of cblas_sgemm (F32, row-major, B transposed as ggml's
// weights are stored) with OpenBLAS limited to `threads` threads, in GFLOP/s.
double openblas_sgemm_gflops(const GemmShape& shape, int threads, int reps);

// The same product as ggml computes it in a model: a [k x n] weight of `type` times
// F32 activations [k x m] on the CPU backend with `threads` threads; best of `reps`.
double ggml_mul_mat_gflops(ggml_type type, const GemmShape& shape, int threads, int reps);
// The same product as earshot's OpenBLAS op computes it in a ggml graph
// (runtime::blas_mul_mat: the weight converted to f32 by the graph, then sgemm in
// ggml's threads).
double blas_op_gflops(ggml_type type, const GemmShape& shape, int threads, int reps);

// The same product on earshot's few-row op (runtime::rows_mul_mat: the weight in its
// type, streamed once per block of rows, multiplied in register tiles).
double rows_op_gflops(ggml_type type, const GemmShape& shape, int threads, int reps);

// A Q8_0 weight's product on earshot's int8 op (runtime::q8_mul_mat: the activations
// quantised once, panels of 32 weight rows on AVX512-VNNI where the CPU has it).
double q8_op_gflops(const GemmShape& shape, int threads, int reps);

// GB/s of summing a `bytes`-long buffer (far beyond the caches) split over
// `threads` threads; best of `reps`.
double read_bandwidth_gbs(size_t bytes, int threads, int reps);

}  // namespace earshot::tools

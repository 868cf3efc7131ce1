#include "tools/common/machine_limits.h"

#include <cblas.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "model/runtime/openblas_ops.h"
#include "model/runtime/q8_gemm.h"
#include "model/runtime/rows_ops.h"

extern "C" {
// OpenBLAS's own entry points (cblas.h of the pthread flavour declares them; kept
// here so that any cblas.h compiles this file).
void openblas_set_num_threads(int num_threads);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

namespace earshot::tools {
namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double best_seconds(int reps, Fn&& fn) {
  fn();  // warm-up: pages touched, threads started, code and weights in cache
  double best = 1e30;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

std::string openblas_description() {
  std::string config = openblas_get_config();
  std::string core = openblas_get_corename();
  return "OpenBLAS " + config + " (core " + core + ")";
}

void use_openblas_best_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* core = runtime::openblas_core_for_this_cpu();
  if (core == nullptr) return;
  // openblas_get_corename() is lower case ("haswell", "skylakex"; "Prescott" once).
  std::string chosen = openblas_get_corename(), wanted = core;
  for (std::string* s : {&chosen, &wanted})
    for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (chosen == wanted) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then the generic kernels it is
}

double openblas_sgemm_gflops(const GemmShape& s, int threads, int reps) {
  openblas_set_num_threads(threads);
  const std::vector<float> a = random_floats(static_cast<size_t>(s.m * s.k), 1);
  const std::vector<float> b = random_floats(static_cast<size_t>(s.n * s.k), 2);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  const double seconds = best_seconds(reps, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(s.m), static_cast<int>(s.n),
                static_cast<int>(s.k), 1.0f, a.data(), static_cast<int>(s.k), b.data(), static_cast<int>(s.k), 0.0f,
                c.data(), static_cast<int>(s.n));
  });
  // A limit from wrong results is no limit: spot-check a few outputs in double.
  for (int64_t probe = 0; probe < 16; ++probe) {
    const int64_t i = (probe * 7919) % s.m, j = (probe * 104729) % s.n;
    double want = 0;
    for (int64_t l = 0; l < s.k; ++l) want += double(a[size_t(i * s.k + l)]) * double(b[size_t(j * s.k + l)]);
    const double got = c[size_t(i * s.n + j)];
    if (std::fabs(got - want) > 1e-3 * (1.0 + std::sqrt(double(s.k)))) {
      throw Error(ErrorCode::kInternal,
                  "OpenBLAS's sgemm (" + openblas_description() + ") computed C[" + std::to_string(i) + "][" +
                      std::to_string(j) + "] = " + std::to_string(got) + ", expected " + std::to_string(want) +
                      ": its kernels are wrong on this CPU; set OPENBLAS_CORETYPE to another core");
    }
  }
  // Back to one thread a call: earshot's OpenBLAS ops call it from each of ggml's threads.
  openblas_set_num_threads(1);
  return s.flop() / seconds * 1e-9;
}

namespace {

enum class Product { kGgml, kOpenBlasOp, kRowsOp, kQ8Op };

double graph_product_gflops(ggml_type type, const GemmShape& s, int threads, int reps, Product product) {
  const ggml_init_params params{ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
  const ggml_context_ptr ctx(ggml_init(params));
  if (!ctx) throw Error(ErrorCode::kInternal, "ggml_init failed for the product benchmark");
  ggml_tensor* w = ggml_new_tensor_2d(ctx.get(), type, s.k, s.n);
  ggml_tensor* x = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, s.k, s.m);
  ggml_tensor* y = product == Product::kOpenBlasOp ? runtime::blas_mul_mat(ctx.get(), w, x)
                   : product == Product::kRowsOp   ? runtime::rows_mul_mat(ctx.get(), w, x)
                   : product == Product::kQ8Op     ? runtime::q8_mul_mat(ctx.get(), w, x)
                                                   : ggml_mul_mat(ctx.get(), w, x);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, y);
  const ggml_backend_ptr backend(ggml_backend_cpu_init());
  if (!backend) throw Error(ErrorCode::kInternal, "cannot start ggml's CPU backend");
  ggml_backend_cpu_set_n_threads(backend.get(), threads);
  const ggml_backend_buffer_ptr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
  if (!buffer) throw Error(ErrorCode::kInternal, "cannot allocate the product benchmark's tensors");
  // (Every tensor of the context, the OpenBLAS op's f32 weight included, has memory.)
  // The weight in its type, from random F32 values (quantised where the type is).
  const std::vector<float> wf = random_floats(static_cast<size_t>(s.k * s.n), 3);
  std::vector<uint8_t> wq(ggml_nbytes(w));
  if (type == GGML_TYPE_F32) {
    std::memcpy(wq.data(), wf.data(), wq.size());
  } else {
    ggml_quantize_chunk(type, wf.data(), wq.data(), 0, s.n, s.k, nullptr);
  }
  ggml_backend_tensor_set(w, wq.data(), 0, wq.size());
  const std::vector<float> xf = random_floats(static_cast<size_t>(s.k * s.m), 4);
  ggml_backend_tensor_set(x, xf.data(), 0, xf.size() * sizeof(float));
  const double seconds = best_seconds(reps, [&] {
    if (ggml_backend_graph_compute(backend.get(), graph) != GGML_STATUS_SUCCESS) {
      throw Error(ErrorCode::kInternal, "the product benchmark's graph failed");
    }
  });
  return s.flop() / seconds * 1e-9;
}

}  // namespace

double q8_op_gflops(const GemmShape& s, int threads, int reps) {
  return graph_product_gflops(GGML_TYPE_Q8_0, s, threads, reps, Product::kQ8Op);
}

double ggml_mul_mat_gflops(ggml_type type, const GemmShape& s, int threads, int reps) {
  return graph_product_gflops(type, s, threads, reps, Product::kGgml);
}

double blas_op_gflops(ggml_type type, const GemmShape& s, int threads, int reps) {
  return graph_product_gflops(type, s, threads, reps, Product::kOpenBlasOp);
}

double rows_op_gflops(ggml_type type, const GemmShape& s, int threads, int reps) {
  return graph_product_gflops(type, s, threads, reps, Product::kRowsOp);
}

double read_bandwidth_gbs(size_t bytes, int threads, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = i;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  const double seconds = best_seconds(reps, [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        uint64_t sum = 0;
        for (size_t i = begin; i < end; ++i) sum += data[i];  // vectorised by the compiler
        sums[static_cast<size_t>(t)] = sum;
      });
    }
    for (std::thread& t : pool) t.join();
  });
  return static_cast<double>(n * sizeof(uint64_t)) / seconds * 1e-9;
}

}  // namespace earshot::tools

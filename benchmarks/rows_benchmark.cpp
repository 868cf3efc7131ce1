// Where a Whisper decoder step's time goes, at its largest product: the logits,
// one activation row times the token embedding (51,864 x 384 for the English
// models, tiny.en's width), F16 and Q8_0, on 1 and 2 threads. Each row reports
// the weight read per second (bytes_per_second), to set beside the machine's
// streaming read (earshot-bench-model prints it):
// - BM_RowsKernel: runtime::rows_product on plain arrays, each thread its share
//   of the weight's rows (std::threads started per product: ~tens of us), so the
//   kernel's own rate with no graph around it.
// - BM_RowsGraph: the same product as rows_mul_mat in a one-node ggml graph,
//   computed by ggml's CPU backend on the threads (what a step's products are):
//   the difference to BM_RowsKernel is the graph's threading.
// - BM_GgmlGraph: ggml_mul_mat in the same graph (--cpu-kernels ggml).
// - BM_NodeOverhead: a chain of tiny ops, each node's cost beyond its work.
// - BM_RowsGraphPool: BM_RowsGraph on a persistent ggml threadpool instead of
//   threads started and joined for every compute (ggml's default without one).
// - BM_CrossAttention: a step's cross-attention over tiny.en's four layers of
//   cross K/V (1,500 frames, 6 heads of 64, F16: 9.2 MB), one query row: the
//   scores by ggml's product (op 0: short dots, the query rounded to f16) or the
//   key-block op (op 1: runtime::key_scores), then ggml's softmax, then the
//   values by ggml's product (ops 0, 1) or runtime::head_values (op 2: what a
//   step on the few-row op computes); bytes_per_second counts the cache read once.
//   avx2:1 caps earshot's kernels at AVX2 (what a Zen 3 runs; ggml's own products
//   keep the machine's best), when this CPU has more.
// Run with --benchmark_repetitions=5 on a quiet machine.
#include <benchmark/benchmark.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "model/runtime/cache_attention.h"
#include "model/runtime/cpu_isa.h"
#include "model/runtime/rows_ops.h"

namespace {

using namespace earshot;

constexpr int64_t kVocab = 51864, kWidth = 384;

struct Weight {
  ggml_type type;
  std::vector<uint8_t> bytes;
  size_t row_bytes;
};

// A random weight [kWidth, kVocab] in `type`, as a model file holds it.
const Weight& weight(ggml_type type) {
  static std::vector<Weight> made;
  for (const Weight& w : made)
    if (w.type == type) return w;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 0.05f);
  std::vector<float> f(static_cast<size_t>(kVocab * kWidth));
  for (float& x : f) x = n(rng);
  Weight w{type, {}, ggml_row_size(type, kWidth)};
  w.bytes.resize(w.row_bytes * kVocab);
  ggml_quantize_chunk(type, f.data(), w.bytes.data(), 0, kVocab, kWidth, nullptr);
  made.push_back(std::move(w));
  return made.back();
}

ggml_type type_of(int64_t arg) { return arg == 0 ? GGML_TYPE_F16 : GGML_TYPE_Q8_0; }

void BM_RowsKernel(benchmark::State& state) {
  const Weight& w = weight(type_of(state.range(0)));
  const int threads = static_cast<int>(state.range(1));
  std::vector<float> x(kWidth, 0.01f), out(kVocab);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const int64_t i0 = kVocab * t / threads, i1 = kVocab * (t + 1) / threads;
      pool.emplace_back([&, i0, i1] {
        runtime::rows_product(w.type, w.bytes.data(), static_cast<int64_t>(w.row_bytes), x.data(), kWidth, kWidth, 1,
                              out.data(), kVocab, nullptr, i0, i1);
      });
    }
    for (std::thread& t : pool) t.join();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes.size()));
}

// One product in a ggml graph over the weight's bytes (no copy), on `threads`:
// ggml's own threads started and joined per compute (pool null), or a
// persistent pool's.
void graph_product(benchmark::State& state, bool rows, bool pool = false) {
  const Weight& w = weight(type_of(state.range(0)));
  const int threads = static_cast<int>(state.range(1));
  ggml_init_params params{64 * 1024 * 1024, nullptr, false};
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* a = ggml_new_tensor_2d(ctx, w.type, kWidth, kVocab);
  a->data = const_cast<uint8_t*>(w.bytes.data());
  ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kWidth, 1);
  for (int64_t k = 0; k < kWidth; ++k) ggml_set_f32_1d(b, static_cast<int>(k), 0.01f);
  ggml_tensor* out = rows ? runtime::rows_mul_mat(ctx, a, b) : ggml_mul_mat(ctx, a, b);
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);
  ggml_threadpool* tp = nullptr;
  if (pool) {
    ggml_threadpool_params p = ggml_threadpool_params_default(threads);
    tp = ggml_threadpool_new(&p);
  }
  ggml_cplan plan = ggml_graph_plan(graph, threads, tp);
  std::vector<uint8_t> work(plan.work_size);
  plan.work_data = work.data();
  for (auto _ : state) ggml_graph_compute(graph, &plan);
  if (tp) ggml_threadpool_free(tp);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes.size()));
  ggml_free(ctx);
}

void BM_RowsGraph(benchmark::State& state) { graph_product(state, true); }
void BM_GgmlGraph(benchmark::State& state) { graph_product(state, false); }
void BM_RowsGraphPool(benchmark::State& state) { graph_product(state, true, true); }

// A graph of `nodes` tiny ops in a chain (a scale of 384 floats each, a decoder
// step's width): what each node costs beyond its work (ggml's per-node
// scheduling and the barrier between nodes), per node in the row's time / nodes.
void BM_NodeOverhead(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  ggml_init_params params{16 * 1024 * 1024, nullptr, false};
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kWidth);
  for (int64_t k = 0; k < kWidth; ++k) ggml_set_f32_1d(x, static_cast<int>(k), 1.0f);
  ggml_tensor* y = x;
  for (int n = 0; n < nodes; ++n) y = ggml_scale(ctx, y, 1.0001f);
  ggml_cgraph* graph = ggml_new_graph_custom(ctx, nodes + 16, false);
  ggml_build_forward_expand(graph, y);
  for (auto _ : state) ggml_graph_compute_with_ctx(ctx, graph, threads);
  // Seconds per node (nodes per second, inverted), shown with its SI prefix.
  state.counters["per_node"] = benchmark::Counter(
      static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  ggml_free(ctx);
}

void BM_CrossAttention(benchmark::State& state) {
  const bool key_op = state.range(0) >= 1, values_op = state.range(0) == 2;
  const int threads = static_cast<int>(state.range(1));
  const runtime::ScopedKernelCap cap(state.range(2) ? runtime::CpuPath::kAvx2 : runtime::CpuPath::kAvx512Vnni);
  constexpr int64_t kFrames = 1500, kHeads = 6, kHeadDim = 64, kLayers = 4;
  ggml_init_params params{64 * 1024 * 1024, nullptr, false};
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, kWidth, kFrames, kLayers);
  ggml_tensor* v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, kFrames, kWidth, kLayers);
  ggml_tensor* q = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kWidth, kLayers);
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (ggml_tensor* t : {k, v}) {
    auto* h = static_cast<ggml_fp16_t*>(t->data);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) h[i] = ggml_fp32_to_fp16(n(rng));
  }
  for (int64_t i = 0; i < ggml_nelements(q); ++i) ggml_set_f32_1d(q, static_cast<int>(i), n(rng));
  ggml_cgraph* graph = ggml_new_graph(ctx);
  const size_t es = sizeof(ggml_fp16_t);
  for (int64_t l = 0; l < kLayers; ++l) {
    ggml_tensor* kc = ggml_view_3d(ctx, k, kHeadDim, kFrames, kHeads, k->nb[1], kHeadDim * es, l * k->nb[2]);
    ggml_tensor* vc = ggml_view_3d(ctx, v, kFrames, kHeadDim, kHeads, v->nb[1], kHeadDim * v->nb[1], l * v->nb[2]);
    ggml_tensor* qh = ggml_view_3d(ctx, q, kHeadDim, 1, kHeads, q->nb[1], kHeadDim * sizeof(float), l * q->nb[1]);
    ggml_tensor* scores = key_op ? runtime::key_scores(ctx, kc, qh) : ggml_mul_mat(ctx, kc, qh);
    ggml_tensor* probs = ggml_soft_max_ext(ctx, scores, nullptr, 0.125f, 0.0f);
    ggml_build_forward_expand(graph, values_op ? runtime::head_values(ctx, vc, probs) : ggml_mul_mat(ctx, vc, probs));
  }
  ggml_cplan plan = ggml_graph_plan(graph, threads, nullptr);
  std::vector<uint8_t> work(plan.work_size);
  plan.work_data = work.data();
  for (auto _ : state) ggml_graph_compute(graph, &plan);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(ggml_nbytes(k) + ggml_nbytes(v)));
  ggml_free(ctx);
}

// type: 0 = F16, 1 = Q8_0; threads: 1, 2.
void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"q8", "threads"})->ArgsProduct({{0, 1}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_RowsKernel)->Apply(Args);
BENCHMARK(BM_RowsGraph)->Apply(Args);
BENCHMARK(BM_GgmlGraph)->Apply(Args);
BENCHMARK(BM_RowsGraphPool)->Apply(Args);
BENCHMARK(BM_CrossAttention)
    ->ArgNames({"op", "threads", "avx2"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// A tiny.en decoder step has 232 nodes.
BENCHMARK(BM_NodeOverhead)
    ->ArgNames({"nodes", "threads"})
    ->ArgsProduct({{232}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

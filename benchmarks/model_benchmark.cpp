// Costs of the Whisper session's self-attention KV cache (runtime::KvCache)
// beyond the decoder graph itself, at real text dimensions (tiny.en: 4 layers x
// 384, 6 heads; base.en: 6 x 512, 8 heads; 448 positions):
// - BM_KvReorder: the beam reorder after every decoder step.
// - BM_LangDetectSlot*: language detection's save and restore of the cache
//   position it overwrites: through the cache's scratch sequence (two copy graphs)
//   against the per-layer, per-channel host transfers the session used before
//   (2 x layers x (1 + n_state) synchronous transfers; on a GPU each is a round trip).
// - BM_BeamFirstStep: a 4-beam pass's first step (the prompt appended to every
//   beam, with the alignment heads' attention, then the reorder), the prompt shared
//   (computed once, copied to the beams) or prefilled for every beam (before).
// Run with --benchmark_repetitions=5: the "min" rows are the fastest repetition.
#include <benchmark/benchmark.h>
#include <ggml-cpu.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "model/runtime/kv_cache.h"
#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"
#include "model/whisper/session.h"

namespace {

using namespace earshot;
namespace fs = std::filesystem;

// 2 threads; EARSHOT_BENCH_THREADS overrides (1 avoids ggml's per-graph thread
// start and barriers, which dominate on an oversubscribed machine).
const int kThreads = [] {
  const char* env = std::getenv("EARSHOT_BENCH_THREADS");
  return env && std::atoi(env) > 0 ? std::atoi(env) : 2;
}();

// With --benchmark_repetitions=N: the fastest run, the figure least disturbed by
// other load on a shared machine.
double fastest(const std::vector<double>& runs) { return *std::min_element(runs.begin(), runs.end()); }

// dims 0: tiny.en, 1: base.en (the templates' own dimensions).
fs::path template_of(int dims) {
  return fs::path(EARSHOT_SHARED_DIR) /
         (dims == 0 ? "models/for-tests-ggml-tiny.en.bin" : "models/for-tests-ggml-base.en.bin");
}

// A random model at the template's text dimensions and full audio context (the
// decoder's cross-attention spans 1500 frames); one audio layer, as the encoder is not measured.
std::shared_ptr<const whisper::Model> text_model(int dims) {
  static std::map<int, std::shared_ptr<const whisper::Model>> models;
  auto& m = models[dims];
  if (!m) {
    whisper::RandomModelSpec spec;
    spec.template_path = template_of(dims);
    spec.hparams = whisper::read_file_header(spec.template_path).hparams;
    spec.hparams.n_audio_layer = 1;
    const fs::path file = fs::temp_directory_path() / ("earshot-bench-model-" + std::to_string(::getpid()) + ".bin");
    whisper::write_random_model(spec, file);
    m = whisper::Model::load(file);
    fs::remove(file);
  }
  return m;
}

whisper::SessionOptions session_options(bool share_prompt = true) {
  whisper::SessionOptions options;
  options.n_threads = kThreads;
  options.share_prompt = share_prompt;
  return options;
}

// args: beams, tokens in the cache (tiny.en dimensions).
void BM_KvReorder(benchmark::State& state) {
  const int beams = static_cast<int>(state.range(0)), n_past = static_cast<int>(state.range(1));
  whisper::Session session(text_model(0), session_options());
  session.encode(std::vector<float>(16000, 0.0f));
  session.reset(beams);
  DecodeRequest prefill;
  prefill.want_attention = false;
  for (int b = 0; b < beams; ++b) {
    std::vector<int32_t> tokens(n_past);
    std::iota(tokens.begin(), tokens.end(), 1000 + 7 * b);
    prefill.tokens.push_back(std::move(tokens));
  }
  session.decode(prefill);
  std::vector<int> source(beams);
  for (int b = 0; b < beams; ++b) source[b] = (b + 1) % beams;  // every beam moves
  for (auto _ : state) session.reorder(source);
}
BENCHMARK(BM_KvReorder)
    ->ComputeStatistics("min", fastest)
    ->Args({3, 64})
    ->Args({5, 64})
    ->Args({5, 200})
    ->Unit(benchmark::kMicrosecond);

struct CpuCache {
  explicit CpuCache(int dims) {
    backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, kThreads);
    const whisper::Hparams hp = whisper::read_file_header(template_of(dims)).hparams;
    runtime::KvCacheShape shape;
    shape.n_layer = hp.n_text_layer;
    shape.n_embd = hp.n_text_state;
    shape.n_ctx = hp.n_text_ctx;
    cache = std::make_unique<runtime::KvCache>(backend, shape, 1);
    cache->set_length(0, 16);
  }
  ~CpuCache() {
    cache.reset();
    ggml_backend_free(backend);
  }
  ggml_backend_t backend;
  std::unique_ptr<runtime::KvCache> cache;
};

// arg: dims. Position 0 of sequence 0 saved and restored through the scratch sequence.
void BM_LangDetectSlotScratch(benchmark::State& state) {
  CpuCache c(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    c.cache->save_to_scratch(0, 0, 1);
    c.cache->restore_from_scratch(0, 0, 1);
  }
}
BENCHMARK(BM_LangDetectSlotScratch)->ComputeStatistics("min", fastest)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// arg: dims. The same slot through the host, as the session did before: K one row
// per layer, V one element per layer and channel (V is stored transposed).
void BM_LangDetectSlotHostTransfers(benchmark::State& state) {
  CpuCache c(static_cast<int>(state.range(0)));
  const runtime::KvCacheShape& shape = c.cache->shape();
  const size_t es = ggml_type_size(shape.type), n_state = shape.n_embd;
  const size_t layer_bytes = static_cast<size_t>(shape.n_ctx) * n_state * es;  // one sequence
  std::vector<uint8_t> saved_k(shape.n_layer * n_state * es), saved_v(shape.n_layer * n_state * es);
  ggml_tensor* k = c.cache->k();
  ggml_tensor* v = c.cache->v();
  auto transfer = [&](bool restore) {
    auto copy = [restore](ggml_tensor* t, uint8_t* host, size_t at, size_t n) {
      restore ? ggml_backend_tensor_set(t, host, at, n) : ggml_backend_tensor_get(t, host, at, n);
    };
    for (int il = 0; il < shape.n_layer; ++il) {
      copy(k, &saved_k[il * n_state * es], il * layer_bytes, n_state * es);
      for (size_t d = 0; d < n_state; ++d) {
        copy(v, &saved_v[(il * n_state + d) * es], il * layer_bytes + d * shape.n_ctx * es, es);
      }
    }
  };
  for (auto _ : state) {
    transfer(false);
    transfer(true);
  }
  state.counters["transfers"] = static_cast<double>(2 * shape.n_layer * (1 + n_state));
}
BENCHMARK(BM_LangDetectSlotHostTransfers)
    ->ComputeStatistics("min", fastest)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

// args: dims, shared (1) or prefilled per beam (0), prompt tokens.
void BM_BeamFirstStep(benchmark::State& state) {
  const int dims = static_cast<int>(state.range(0)), n_prompt = static_cast<int>(state.range(2));
  constexpr int kBeams = 4;
  whisper::Session session(text_model(dims), session_options(state.range(1) != 0));
  session.encode(std::vector<float>(16000, 0.0f));
  std::vector<int32_t> prompt(n_prompt);
  std::iota(prompt.begin(), prompt.end(), 1000);
  prompt[0] = session.tokenizer().special().sot;
  DecodeRequest request;
  request.tokens.assign(kBeams, prompt);
  request.logits_positions = {0, n_prompt - 1};
  request.want_attention = true;
  const std::vector<int> source = {1, 0, 2, 0};
  for (auto _ : state) {
    session.reset(kBeams);
    benchmark::DoNotOptimize(session.decode(request));
    session.reorder(source);
  }
}
BENCHMARK(BM_BeamFirstStep)
    ->ComputeStatistics("min", fastest)
    ->ArgsProduct({{0, 1}, {0, 1}, {4, 32}})
    ->ArgNames({"dims", "shared", "prompt"})
    ->Unit(benchmark::kMillisecond);

}  // namespace

// Draft latency of a translation LLM at Hy-MT2-1.8B's dimensions (d 2048, 32
// layers, 16 heads x 128, 4 KV heads, FFN 6144; Qwen2's 152k vocabulary grafted,
// tied head), random weights: a ~100-token prompt, then greedy steps, on 2
// threads, f16 and llama_model_quantize'd q8_0 / q4_0, with the attention capture
// of 8 calibrated heads on and off. The models are written to a temporary folder
// at start (about 3.7 GB f16) and removed at exit.
//   build/release/benchmarks/earshot_bench_llm [--benchmark_filter=q8_0]
// EARSHOT_BENCH_LLM_LAYERS=N uses N layers instead of 32 (a quicker, smaller run);
// EARSHOT_BENCH_LLM_THREADS=N changes the thread count; EARSHOT_BENCH_LLM_DIR=DIR
// keeps the models in DIR and reuses them on the next run. BM_LlmVerify: a
// re-draft's verification batch (speculative) against the steps it replaces.
// BM_LlmDraft also prints the prompt's GFLOP/s against OpenBLAS's sgemm at its
// shapes, and a step's weight reads against a streaming read, both measured on
// the same threads in the same run (prompt_vs_sgemm, step_vs_read).
#include <benchmark/benchmark.h>
#include <llama.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/llm/llama_backend.h"
#include "model/llm/random_llm.h"
#include "tools/common/machine_limits.h"

namespace {

using namespace earshot::llm;

constexpr int kPromptTokens = 100;
constexpr int kGreedySteps = 16;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

RandomLlmSpec bench_spec() {
  RandomLlmSpec spec =
      RandomLlmSpec::hy_mt2_1_8b(std::filesystem::path(EARSHOT_LLAMA_MODELS_DIR) / "ggml-vocab-qwen2.gguf");
  spec.n_layer = env_int("EARSHOT_BENCH_LLM_LAYERS", spec.n_layer);
  return spec;
}

struct Models {
  std::filesystem::path dir;
  bool keep = false;  // a folder the user named: reused, not removed
  std::map<std::string, std::shared_ptr<const LlamaModel>> loaded;
  ~Models() {
    loaded.clear();
    std::error_code ec;
    if (!keep) std::filesystem::remove_all(dir, ec);
  }
};

Models& models() {
  static Models m = [] {
    set_llama_log_sink(nullptr);  // libllama's warnings only, not its quantisation chatter
    Models out;
    const char* named = std::getenv("EARSHOT_BENCH_LLM_DIR");
    out.keep = named != nullptr;
    out.dir = named != nullptr
                  ? std::filesystem::path(named)
                  : std::filesystem::temp_directory_path() / ("earshot-bench-llm-" + std::to_string(::getpid()));
    std::filesystem::create_directories(out.dir);
    RandomLlmSpec spec = bench_spec();
    if (!std::filesystem::exists(out.dir / "f16.gguf")) write_random_llm(spec, out.dir / "f16.gguf");
    for (const auto& [name, ftype] : {std::pair{"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0}, {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}}) {
      llama_model_quantize_params q = llama_model_quantize_default_params();
      q.ftype = ftype;
      q.nthread = 2;
      const std::string in = (out.dir / "f16.gguf").string(), file = (out.dir / (std::string(name) + ".gguf")).string();
      if (std::filesystem::exists(file)) continue;
      if (llama_model_quantize(in.c_str(), file.c_str(), &q) != 0) {
        throw earshot::Error(earshot::ErrorCode::kInternal, std::string("llama_model_quantize to ") + name + " failed");
      }
    }
    return out;
  }();
  return m;
}

// Weights a token's pass multiplies (every layer's projections and feed-forward;
// the output layer apart: a prompt computes its logits for the last token only).
double layer_weights(const RandomLlmSpec& s) {
  const double d = s.n_embd, q = static_cast<double>(s.n_head) * s.head_dim,
               kv = static_cast<double>(s.n_head_kv) * s.head_dim;
  return s.n_layer * (d * q + 2 * d * kv + q * d + 3 * d * s.n_ff);
}

// The machine's limits on the same threads, measured once in this run
// (tools/common/machine_limits.h): OpenBLAS's sgemm at a prompt's product shapes
// (FLOP-weighted: attention's and the feed-forward's), and a streaming read.
struct MachineLimits {
  double sgemm_gflops = 0;
  double read_gbs = 0;
};
const MachineLimits& machine_limits() {
  static const MachineLimits limits = [] {
    const RandomLlmSpec s = bench_spec();
    const int threads = env_int("EARSHOT_BENCH_LLM_THREADS", 2);
    const int64_t d = s.n_embd, q = static_cast<int64_t>(s.n_head) * s.head_dim, ff = s.n_ff;
    double flop = 0, seconds = 0;
    for (const earshot::tools::GemmShape g : {earshot::tools::GemmShape{kPromptTokens, q, d},
                                              {kPromptTokens, d, q},
                                              {kPromptTokens, ff, d},
                                              {kPromptTokens, d, ff}}) {
      const double times = g.n == ff ? 2 : 1;  // gate and up
      flop += times * g.flop();
      seconds += times * g.flop() / (1e9 * earshot::tools::openblas_sgemm_gflops(g, threads, 5));
    }
    MachineLimits m;
    m.sgemm_gflops = flop / seconds / 1e9;
    m.read_gbs = earshot::tools::read_bandwidth_gbs(size_t{1} << 30, threads, 3);
    return m;
  }();
  return limits;
}

std::shared_ptr<const LlamaModel> model(const std::string& type) {
  auto& loaded = models().loaded;
  if (loaded.count(type) == 0) {
    loaded.clear();  // one model in memory at a time
    LlamaModelOptions o;
    o.threads = env_int("EARSHOT_BENCH_LLM_THREADS", 2);
    loaded[type] = LlamaModel::load(models().dir / (type + ".gguf"), o);
  }
  return loaded[type];
}

// One draft: the prompt, then greedy steps; counters in milliseconds per draft
// and generated tokens per second.
void BM_LlmDraft(benchmark::State& state, std::string type, bool capture) {
  auto m = model(type);
  auto session = m->open_session({.context_tokens = 512, .threads = 0});
  if (capture)
    session->set_attention_capture({{9, 5}, {13, 1}, {9, 6}, {12, 11}, {14, 2}, {14, 0}, {4, 12}, {1, 10}}, 10, 90);
  std::vector<Token> prompt(kPromptTokens);
  for (int i = 0; i < kPromptTokens; ++i) prompt[i] = static_cast<Token>((i * 7919 + 13) % 150000);
  using Clock = std::chrono::steady_clock;
  double prompt_s = 0, steps_s = 0;
  for (auto _ : state) {
    session->remove_suffix(0);
    const auto t0 = Clock::now();
    session->decode(prompt);
    const auto t1 = Clock::now();
    for (int i = 0; i < kGreedySteps; ++i) {
      const Token t = session->greedy();
      benchmark::DoNotOptimize(session->decode(std::span(&t, 1)));
    }
    const auto t2 = Clock::now();
    prompt_s += std::chrono::duration<double>(t1 - t0).count();
    steps_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["prompt_ms"] = 1e3 * prompt_s / n;
  state.counters["step_ms"] = 1e3 * steps_s / (n * kGreedySteps);
  state.counters["gen_tok_per_s"] = n * kGreedySteps / steps_s;
  state.counters["prompt_tok_per_s"] = n * kPromptTokens / prompt_s;
  // Against the machine: the prompt's products (2 FLOP per weight and token) over
  // OpenBLAS's sgemm rate at its shapes; a step's weight reads (the file: every
  // weight, the tied output layer included) over a streaming read's bandwidth.
  const MachineLimits& limits = machine_limits();
  const double prompt_gflops = 2.0 * layer_weights(bench_spec()) * kPromptTokens * n / prompt_s / 1e9;
  const double step_gbs = static_cast<double>(std::filesystem::file_size(models().dir / (type + ".gguf"))) /
                          (steps_s / (n * kGreedySteps)) / 1e9;
  state.counters["prompt_gflops"] = prompt_gflops;
  state.counters["sgemm_gflops"] = limits.sgemm_gflops;
  state.counters["prompt_vs_sgemm"] = prompt_gflops / limits.sgemm_gflops;
  state.counters["step_gbs"] = step_gbs;
  state.counters["read_gbs"] = limits.read_gbs;
  state.counters["step_vs_read"] = step_gbs / limits.read_gbs;
}

// A re-draft's verification: the last prompt token and kGreedySteps proposed
// tokens (the model's own greedy continuation, so all are accepted) in one
// decode_each, against the steps that generate them. Counters: the batch's
// milliseconds per verified token (compute-bound, like the prompt) against a
// step's (memory-bound); how many of the batch's greedy choices equal the
// steps' (batch and one-token evaluations use other kernels, so logits may
// differ in the last bits); the largest logit difference on the last row.
void BM_LlmVerify(benchmark::State& state, std::string type) {
  auto m = model(type);
  auto session = m->open_session({.context_tokens = 512, .threads = 0});
  session->set_attention_capture({{9, 5}, {13, 1}, {9, 6}, {12, 11}, {14, 2}, {14, 0}, {4, 12}, {1, 10}}, 10, 90);
  std::vector<Token> prompt(kPromptTokens);
  for (int i = 0; i < kPromptTokens; ++i) prompt[i] = static_cast<Token>((i * 7919 + 13) % 150000);
  using Clock = std::chrono::steady_clock;
  // The reference: prompt, then steps (timed), keeping the last logits.
  session->decode(prompt);
  std::vector<Token> steps;
  const auto s0 = Clock::now();
  for (int i = 0; i < kGreedySteps; ++i) {
    steps.push_back(session->greedy());
    if (i + 1 < kGreedySteps) session->decode(std::span(&steps.back(), 1));
  }
  const double steps_s = std::chrono::duration<double>(Clock::now() - s0).count();
  const auto* llama = static_cast<const LlamaSession*>(session.get());
  const std::vector<float> step_logits(llama->last_logits().begin(), llama->last_logits().end());
  std::vector<Token> batch = {prompt.back()};
  batch.insert(batch.end(), steps.begin(), steps.end() - 1);
  double verify_s = 0;
  int agree = 0;
  double max_diff = 0;
  for (auto _ : state) {
    session->remove_suffix(kPromptTokens - 1);
    std::vector<Token> choices;
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(session->decode_each(batch, 0, choices));
    verify_s += std::chrono::duration<double>(Clock::now() - t0).count();
    agree = 0;
    for (std::size_t i = 0; i < choices.size(); ++i) agree += choices[i] == steps[i];
    const std::span<const float> logits = llama->last_logits();
    for (std::size_t i = 0; i < logits.size(); ++i)
      max_diff = std::max(max_diff, std::abs(static_cast<double>(logits[i]) - step_logits[i]));
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["verify_ms_per_token"] = 1e3 * verify_s / (n * batch.size());
  state.counters["step_ms"] = 1e3 * steps_s / kGreedySteps;
  state.counters["greedy_agree"] = agree;
  state.counters["of"] = static_cast<double>(batch.size());
  state.counters["last_row_max_logit_diff"] = max_diff;
}

void register_all() {
  // Capture needs layers 1..14 (the calibrated heads); a smaller run skips it.
  const bool capture_fits = env_int("EARSHOT_BENCH_LLM_LAYERS", 32) > 14;
  for (const char* type : {"f16", "q8_0", "q4_0"}) {
    for (bool capture : {false, true}) {
      if (capture && !capture_fits) continue;
      benchmark::RegisterBenchmark(
          (std::string("BM_LlmDraft/") + type + (capture ? "/capture" : "/no_capture")).c_str(), BM_LlmDraft,
          std::string(type), capture)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(2)
          ->UseRealTime();
    }
    if (capture_fits)
      benchmark::RegisterBenchmark((std::string("BM_LlmVerify/") + type).c_str(), BM_LlmVerify, std::string(type))
          ->Unit(benchmark::kMillisecond)
          ->Iterations(2)
          ->UseRealTime();
  }
}

const int registered = (register_all(), 0);

}  // namespace

// Its own main: OpenBLAS must load with its best kernels for the sgemm limit
// (use_openblas_best_kernels re-executes the program when it would not).
int main(int argc, char** argv) {
  earshot::tools::use_openblas_best_kernels(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

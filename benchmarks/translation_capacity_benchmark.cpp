// How many sessions' translation one machine sustains, at Hy-MT2-1.8B's
// dimensions (random weights, Qwen2's vocabulary; bench/translation_capacity.h):
// N live translation stages on one model and one pool of W workers, fed a
// scripted ASR output in real time (2.5 words/s, a commit every second, 2
// provisional words, a period every 12 words); N doubles from 1 until a run is
// not sustained (p90 final lag over 3 s, or a stream's drafts more than 2 s
// apart at p90, or a stream not drained).
//   build/release/benchmarks/earshot_bench_tcap [--type q4_0] [--layers 32] [--workers 1]
//       [--threads 2] [--seconds 30] [--max-sessions 16] [--max-new-tokens 32] [--attention softmax|qk]
//       [--verify on|off] [--fit-budget on|off] [--release-first on|off] [--redraft-tokens 2] [--batch N]
//       [--workload model|reference]
// --workload reference runs every real graph but takes the reference
// translation's tokens and alignment (bench/translation_reference.h: the
// source copied token for token), so re-drafts repeat the last draft and stop
// at the source's length as a real translator's do, and each source word's
// committed-target delay (its translation's commit after its own) is measured.
// --verify off --fit-budget off is the engine before re-drafts verified the last
// draft and drafts' budgets followed their source (every call up to
// --max-new-tokens, every token stepped). Each run also prints the tokens per
// model call: prompt decoded / reused from the KV cache, verified / accepted,
// generated / stepped.
// --batch N instead runs N sessions twice, each session's model calls on its own
// context (unbatched) and through llm::BatchedLlamaModel (the steps of the
// sessions calling at the same moment in one llama_decode), both with
// max(--workers, N) workers, and prints for each: target tokens generated and
// tokens evaluated per second, draft gap p50/p90, final lag median/p90/max, and
// for the batched run the llama_decode rounds and the sessions in them. Before
// them, greedy steps alone: 16 steps of 1 session, of N sessions on their own
// contexts at once, and of N sessions batched.
// Models are written to EARSHOT_BENCH_LLM_DIR (kept, shared with earshot_bench_llm's
// file names) or a temporary folder (removed). Random weights never stop early,
// so every final generates --max-new-tokens tokens (a 12-word sentence's
// translation is about that long).
#include <llama.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/translation_capacity.h"
#include "bench/translation_reference.h"
#include "common/command_line.h"
#include "common/error.h"
#include "model/llm/batched_llama.h"
#include "model/llm/llama_backend.h"
#include "model/llm/random_llm.h"

namespace {

using namespace earshot;
namespace fs = std::filesystem;

fs::path write_model(const fs::path& dir, const std::string& type, int layers) {
  const std::string stem = layers == 32 ? type : type + "-l" + std::to_string(layers);
  const fs::path file = dir / (stem + ".gguf");
  if (fs::exists(file)) return file;
  llm::RandomLlmSpec spec =
      llm::RandomLlmSpec::hy_mt2_1_8b(fs::path(EARSHOT_LLAMA_MODELS_DIR) / "ggml-vocab-qwen2.gguf");
  spec.n_layer = layers;
  const fs::path f16 = dir / ((layers == 32 ? std::string("f16") : "f16-l" + std::to_string(layers)) + ".gguf");
  if (!fs::exists(f16)) llm::write_random_llm(spec, f16);
  if (type == "f16") return f16;
  llama_model_quantize_params q = llama_model_quantize_default_params();
  q.ftype = type == "q8_0" ? LLAMA_FTYPE_MOSTLY_Q8_0 : LLAMA_FTYPE_MOSTLY_Q4_0;
  q.nthread = 2;
  if (llama_model_quantize(f16.string().c_str(), file.string().c_str(), &q) != 0)
    throw Error(ErrorCode::kInternal, "llama_model_quantize to " + type + " failed");
  return file;
}

bool on_off(const std::string& value, const std::string& option) {
  if (value != "on" && value != "off") throw Error(ErrorCode::kInvalidArgument, option + ": on or off");
  return value == "on";
}

// Greedy steps alone: n sessions on n threads each decode a 48-token prompt,
// then (timed, from a barrier) `steps` greedy steps. Returns the steps per
// second of all sessions together, and the llama_decode calls per second where
// `batcher` counts them.
struct StepRate {
  double tokens_per_second = 0;
  double decodes_per_second = 0;
};

StepRate step_rate(const llm::LlmModel& model, int n, int steps, const llm::BatchedLlamaModel* batcher) {
  std::vector<std::unique_ptr<llm::LlmSession>> sessions;
  for (int i = 0; i < n; ++i) sessions.push_back(model.open_session({.context_tokens = 256}));
  std::barrier start(n + 1);
  std::barrier end(n + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      llm::LlmSession& s = *sessions[static_cast<std::size_t>(i)];
      std::vector<llm::Token> prompt;
      for (int k = 0; k < 48; ++k) prompt.push_back(static_cast<llm::Token>(1000 + 97 * i + 31 * k));
      s.decode(prompt);
      start.arrive_and_wait();
      s.set_stepping(true);
      for (int k = 0; k < steps; ++k) {
        const llm::Token t = s.greedy();
        s.decode(std::span(&t, 1));
      }
      s.set_stepping(false);
      end.arrive_and_wait();
    });
  }
  start.arrive_and_wait();
  const int64_t rounds_before = batcher != nullptr ? batcher->counts().rounds : 0;
  const auto t0 = std::chrono::steady_clock::now();
  end.arrive_and_wait();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& t : threads) t.join();
  StepRate r;
  r.tokens_per_second = n * steps / seconds;
  r.decodes_per_second =
      batcher != nullptr ? static_cast<double>(batcher->counts().rounds - rounds_before) / seconds : 0.0;
  return r;
}

// N sessions with and without cross-session batching.
// The model the engine sees: with --workload reference, the reference
// translation's choices over the real graphs (bench/translation_reference.h).
std::shared_ptr<const llm::LlmModel> as_workload(std::shared_ptr<const llm::LlmModel> model, bool reference,
                                                 const bench::TranslationCapacityOptions& co) {
  if (!reference) return model;
  bench::TranslationReferenceOptions r =
      bench::translation_reference_prompt(*model, co.source_language, co.target_language);
  return bench::reference_translation_model(std::move(model), std::move(r));
}

// "p50/p90 s" of a distribution, or "n/a" without samples.
std::string median_p90(const bench::Distribution& d) {
  if (d.count == 0) return "n/a";
  char text[40];
  std::snprintf(text, sizeof text, "%.2f/%.2f s", d.median, d.p90);
  return text;
}

void compare_batching(const std::shared_ptr<const llm::LlamaModel>& model,
                      const stages::translation::CalibrationRegistry& registry,
                      const stages::translation::TranslationOptions& to, int workers, int n,
                      const bench::TranslationCapacityOptions& co) {
  {
    const int steps = 16;
    const StepRate one = step_rate(*model, 1, steps, nullptr);
    const StepRate apart = step_rate(*model, n, steps, nullptr);
    llm::BatchedLlamaModel batcher(model, {.max_sessions = n, .context_tokens = 256, .threads = 0});
    const StepRate together = step_rate(batcher, n, steps, &batcher);
    std::printf(
        "greedy steps, %d each: 1 session %.2f tok/s; %d sessions unbatched %.2f tok/s, batched %.2f tok/s "
        "(%.2f llama_decode/s, %.2f sessions each)\n",
        steps, one.tokens_per_second, n, apart.tokens_per_second, together.tokens_per_second,
        together.decodes_per_second,
        together.decodes_per_second > 0 ? together.tokens_per_second / together.decodes_per_second : 0.0);
  }
  std::printf("%d sessions, %d workers: unbatched vs batched (one llama_decode for the sessions calling at once)\n", n,
              workers);
  std::printf("%-9s %9s %9s %18s %22s %9s\n", "mode", "gen tok/s", "eval tok/s", "draft gap p50/p90",
              "final lag med/p90/max", "sustained");
  for (const bool batched : {false, true}) {
    std::shared_ptr<llm::BatchedLlamaModel> batcher;
    std::shared_ptr<const llm::LlmModel> used = model;
    if (batched) {
      batcher = std::make_shared<llm::BatchedLlamaModel>(
          model, llm::LlamaBatchOptions{.max_sessions = n, .context_tokens = to.context_tokens, .threads = 0});
      used = batcher;
    }
    stages::translation::TranslationService service(as_workload(used, co.target_copies_source, co), registry, workers,
                                                    to);
    service.set_warning_sink([](const std::string& m) { std::fprintf(stderr, "warning: %s\n", m.c_str()); });
    const bench::TranslationCapacityRun r = bench::run_translation_capacity(service, n, co);
    const stages::translation::TranslationCounts& c = r.counts;
    const double wall = std::max(r.wall_seconds, 1e-9);
    // No stream with two drafts: no gap to state.
    char gap[32] = "      (none)";
    if (r.draft_interval.count > 0)
      std::snprintf(gap, sizeof gap, "%5.2f/%5.2f s", r.draft_interval.median, r.draft_interval.p90);
    std::printf("%-9s %9.2f %9.2f %18s %8.2f/%5.2f/%6.2f s %9s\n", batched ? "batched" : "unbatched",
                c.generated / wall, (c.prompt_decoded + c.proposed + c.stepped) / wall, gap, r.final_lag.median,
                r.final_lag.p90, r.final_lag.max, r.sustained ? "yes" : (r.drained ? "no" : "no (drain)"));
    std::printf(
        "%-9s calls %ld drafts + %ld finals (%ld drafts skipped); tokens per call: prompt %.1f, verified %.1f "
        "(%.1f accepted), stepped %.1f; committed target after committed source p50/p90 %s\n",
        "", r.draft_calls, r.final_calls, r.skipped_drafts,
        c.prompt_decoded / std::max(1.0, static_cast<double>(c.calls())),
        c.proposed / std::max(1.0, static_cast<double>(c.calls())),
        c.accepted / std::max(1.0, static_cast<double>(c.calls())),
        c.stepped / std::max(1.0, static_cast<double>(c.calls())), median_p90(r.commit_delay).c_str());
    if (batcher) {
      const llm::BatchedLlamaModel::Counts b = batcher->counts();
      std::string sizes;
      for (std::size_t k = 0; k < b.round_sessions.size(); ++k)
        if (b.round_sessions[k] > 0)
          sizes += (sizes.empty() ? "" : ", ") + std::to_string(k + 1) + ": " + std::to_string(b.round_sessions[k]);
      std::printf(
          "%-9s model calls %ld in %ld batches (largest %ld); llama_decode rounds %ld, sessions per round "
          "mean %.2f (sessions: rounds = %s); lone sessions %ld\n",
          "", static_cast<long>(b.calls), static_cast<long>(b.batches), static_cast<long>(b.max_batch),
          static_cast<long>(b.rounds), b.mean_round_sessions(), sizes.c_str(), static_cast<long>(b.lone_sessions));
    }
    std::fflush(stdout);
  }
}

int run(int argc, char** argv) {
  Args args("earshot_bench_tcap", "sessions' translation one machine sustains");
  args.option("type", "weights: f16, q8_0 or q4_0", "q4_0")
      .option("layers", "decoder layers (32 = Hy-MT2-1.8B)", "32")
      .option("workers", "translation pool threads (--translation-workers)", "1")
      .option("threads", "CPU threads per model call", "2")
      .option("seconds", "length of each stream", "30")
      .option("max-sessions", "largest N tried", "16")
      .option("max-new-tokens", "tokens generated per call", "32")
      .option("attention", "attention route: softmax or qk", "softmax")
      .option("verify", "re-drafts and finals verify the last draft in one batch: on or off", "on")
      .option("fit-budget", "a draft's token budget fitted to its source (else --max-new-tokens): on or off", "on")
      .option("batch", "N > 0: run N sessions unbatched, then batched across sessions, and compare", "0")
      .option("release-first",
              "a re-draft first sends what the last draft already commits (TranslationOptions::release_first): on "
              "or off",
              "on")
      .option("redraft-tokens", "new source tokens before a re-draft (TranslationOptions::redraft_source_tokens)", "2")
      .option("workload",
              "model (the random model's own greedy tokens) or reference (real graphs, the reference translation's "
              "tokens and alignment: bench/translation_reference.h)",
              "model");
  if (!args.parse_or_help(std::vector<std::string>(argv + 1, argv + argc))) return 0;
  const std::string type = args.get("type");
  if (type != "f16" && type != "q8_0" && type != "q4_0")
    throw Error(ErrorCode::kInvalidArgument, "--type: f16, q8_0 or q4_0");
  const int layers = static_cast<int>(args.get_int("layers"));
  if (layers < 15)
    throw Error(ErrorCode::kInvalidArgument, "--layers: at least 15 (the calibrated heads reach layer 14)");

  llm::set_llama_log_sink(nullptr);
  const char* named = std::getenv("EARSHOT_BENCH_LLM_DIR");
  const fs::path dir = named != nullptr
                           ? fs::path(named)
                           : fs::temp_directory_path() / ("earshot-bench-tcap-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{dir, named != nullptr};

  const fs::path file = write_model(dir, type, layers);
  llm::LlamaModelOptions mo;
  mo.threads = static_cast<int>(args.get_int("threads"));
  mo.attention_route = llm::parse_attention_route(args.get("attention"));
  std::shared_ptr<const llm::LlamaModel> model = llm::LlamaModel::load(file, mo);
  const long batch = args.get_int("batch");
  if (batch < 0 || batch > 64) throw Error(ErrorCode::kInvalidArgument, "--batch: 0 (off) or 1..64 sessions");

  stages::translation::CalibrationRegistry registry;
  // Hy-MT2-1.8B zh->en's published heads, keyed by this file's id.
  registry.add({model->id(), "en", "zh", {{9, 5}, {13, 1}, {9, 6}, {12, 11}, {14, 2}, {14, 0}, {4, 12}, {1, 10}}, {}});
  stages::translation::TranslationOptions to;
  to.target_language = "zh";
  to.max_new_tokens = static_cast<int>(args.get_int("max-new-tokens"));
  to.verify_drafts = on_off(args.get("verify"), "--verify");
  if (!on_off(args.get("fit-budget"), "--fit-budget")) to.draft_tokens_per_source = 0;
  to.release_first = on_off(args.get("release-first"), "--release-first");
  to.redraft_source_tokens = static_cast<int>(args.get_int("redraft-tokens"));
  if (to.redraft_source_tokens < 1) throw Error(ErrorCode::kInvalidArgument, "--redraft-tokens: at least 1");
  to.context_tokens = 1024;
  const int workers = static_cast<int>(args.get_int("workers"));
  bench::TranslationCapacityOptions co;
  co.stream_seconds = args.get_double("seconds");
  const std::string workload = args.get("workload");
  if (workload != "model" && workload != "reference")
    throw Error(ErrorCode::kInvalidArgument, "--workload: model or reference");
  co.target_copies_source = workload == "reference";
  if (batch > 0) {
    std::printf(
        "%s, %d layers, %ld thread(s), %s attention, at most %d new tokens per call, verification %s, %.0f s "
        "streams, --workload %s\n",
        type.c_str(), layers, args.get_int("threads"), args.get("attention").c_str(), to.max_new_tokens,
        args.get("verify").c_str(), co.stream_seconds, workload.c_str());
    compare_batching(model, registry, to, std::max(workers, static_cast<int>(batch)), static_cast<int>(batch), co);
    return 0;
  }
  stages::translation::TranslationService service(as_workload(model, co.target_copies_source, co), std::move(registry),
                                                  workers, to);
  service.set_warning_sink([](const std::string& m) { std::fprintf(stderr, "warning: %s\n", m.c_str()); });

  std::printf(
      "%s, %d layers, %d worker(s) x %ld thread(s), %s attention, at most %d new tokens per call (budget fitted to "
      "the source: %s), verification %s, %.0f s streams, --workload %s\n",
      type.c_str(), layers, workers, args.get_int("threads"), args.get("attention").c_str(), to.max_new_tokens,
      args.get("fit-budget").c_str(), args.get("verify").c_str(), co.stream_seconds, workload.c_str());
  std::printf("%8s %10s %10s %8s %8s %22s %18s %9s %22s\n", "sessions", "drafts/min", "finals/min", "skipped", "finals",
              "final lag med/p90/max", "draft gap p50/p90", "sustained", "commit delay p50/p90");
  int best = 0;
  for (int n = 1; n <= args.get_int("max-sessions"); n *= 2) {
    const bench::TranslationCapacityRun r = bench::run_translation_capacity(service, n, co);
    const double minutes = r.audio_seconds / 60.0;
    std::printf("%8d %10.1f %10.1f %8ld %8ld %8.2f/%5.2f/%6.2f s %10.2f/%5.2f s %9s %22s\n", n, r.draft_calls / minutes,
                r.final_calls / minutes, r.skipped_drafts, r.finals_arrived, r.final_lag.median, r.final_lag.p90,
                r.final_lag.max, r.draft_interval.median, r.draft_interval.p90,
                r.sustained ? "yes" : (r.drained ? "no" : "no (drain)"), median_p90(r.commit_delay).c_str());
    if (r.off_reference_segments > 0)
      std::printf("%8s %ld segment(s) committed a target off the reference (not measured)\n", "",
                  r.off_reference_segments);
    // Per model call: prompt tokens decoded / reused from the KV cache, the last
    // draft's tokens verified in the prompt's batch / accepted, target tokens
    // generated / stepped (one model evaluation each).
    const stages::translation::TranslationCounts& c = r.counts;
    const double calls = std::max(1.0, static_cast<double>(c.calls()));
    std::printf(
        "%8s tokens per call: prompt %.1f decoded + %.1f reused, verified %.1f (%.1f accepted), "
        "generated %.1f (%.1f stepped)\n",
        "", c.prompt_decoded / calls, c.prompt_reused / calls, c.proposed / calls, c.accepted / calls,
        c.generated / calls, c.stepped / calls);
    std::fflush(stdout);
    if (!r.sustained) break;
    best = n;
  }
  std::printf("largest N sustained: %d\n", best);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot_bench_tcap: %s\n", e.what());
    return 1;
  }
}

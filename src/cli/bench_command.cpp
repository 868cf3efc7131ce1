// `earshot bench`: quality, latency and speed of the streaming pipeline, per
// system (earshot's policies, the whispercpp-stream baseline), on one dataset
// in one run. The accounting is in src/bench (see metrics.h for definitions).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "audio/audio.h"
#include "bench/capacity.h"
#include "bench/capacity_report.h"
#include "bench/dataset.h"
#include "bench/metrics.h"
#include "bench/pass_stats.h"
#include "bench/reference_workload.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/trace_io.h"
#include "bench/translation.h"
#include "bench/translation_reference.h"
#include "cli/bench_diarization.h"
#include "cli/bench_settings.h"
#include "cli/bench_turns.h"
#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/catalogue.h"
#include "engine/families.h"
#include "model/registry.h"
#include "session/silero_vad.h"
#include "stages/diarization/sortformer/sortformer_source.h"
#include "stages/registry.h"
#include "stages/translation/registration.h"
#include "vad/vad.h"

extern char** environ;

namespace earshot::cli {
namespace {
namespace fs = std::filesystem;
using bench::SystemResult;

fs::path model_path(const std::string& name_or_path) { return engine::resolve_model(name_or_path); }

fs::path vad_model_path(const std::string& flag) {
  fs::path path = flag;
  if (flag.empty()) path = models::default_cache_dir() / "ggml-silero-v6.2.0.bin";
  if (path.empty() || !fs::exists(path))
    throw Error(ErrorCode::kIo, "--workload reference (word times) and --capacity (the pipeline) need Silero VAD: " +
                                    (path.empty() ? std::string("give --vad-model PATH")
                                                  : "no VAD weights at " + path.string() + "; give --vad-model PATH"));
  return path;
}

double cpu_seconds_self() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Linux lets a process reset its peak RSS (VmHWM) by writing 5 to clear_refs,
// so each in-process system gets its own peak; otherwise the process peak so far.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}
long peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) * 1024;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024;
}

class ProgressLine {
 public:
  explicit ProgressLine(std::string name) : name_(std::move(name)), tty_(isatty(fileno(stderr)) != 0) {}
  void update(const std::string& what) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[%s] %s", name_.c_str(), what.c_str());
    } else {
      std::fprintf(stderr, "[%s] %s\n", name_.c_str(), what.c_str());
    }
    std::fflush(stderr);
  }
  void done(const std::string& what) {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%s] %s\n", name_.c_str(), what.c_str());
  }

 private:
  std::string name_;
  bool tty_;
};

// What bench loads before its runs: the dataset's readable audio, and with
// --workload reference or --capacity the VAD and each utterance's words with times.
struct BenchInputs {
  std::vector<std::vector<float>> audio;  // per utterance of the report's config
  std::shared_ptr<const vad::VadModel> vad;
  std::vector<std::vector<bench::TimedWord>> reference_words;  // --workload reference: per utterance (else empty)
};

bench::StreamHandle open_policy_stream(const engine::Engine& engine, const std::string& policy, const BenchSettings& s,
                                       const BenchInputs& in, int file) {
  auto stats = std::make_shared<bench::ComputeStats>();
  engine::StreamRequest request;
  request.policy = policy;
  request.language = s.language;
  request.keyterms = s.keyterms;
  request.on_pass = bench::count_passes(stats);
  request.on_warning = [](const std::string&) {};  // a bench run reports numbers, not per-pass warnings
  bench::StreamHandle h;
  if (in.reference_words.empty()) {
    h.processor = engine.open_stream(request);
  } else {
    h.processor = bench::open_reference_stream(engine, request, in.reference_words.at(file)).processor;
  }
  h.stats = [stats] { return *stats; };
  return h;
}

// --translate-to: every stream's ASR output through a fresh synchronous
// translation stage, after the ASR run (its numbers stay the ASR's own).
struct TranslationBench {
  std::shared_ptr<stages::translation::TranslationService> service;
  std::string target;
  std::vector<std::string> references;  // per utterance, "" = none
};

bench::TranslationSummary run_translation(const bench::SystemRun& run, const TranslationBench& t,
                                          const BenchSettings& s, const std::string& name) {
  ProgressLine progress(name + " translation");
  stages::translation::TranslationOptions options = t.service->defaults();
  options.target_language = t.target;
  std::vector<bench::TranslationTrace> traces;
  std::vector<std::string> references;
  bench::SteadyClock clock;
  for (const bench::StreamRecord& r : run.streams) {
    if (!r.error.empty()) continue;
    const std::unique_ptr<stages::Stage> stage = t.service->make_synchronous_stage(s.language, options);
    traces.push_back(bench::translate_trace(r.trace, *stage, s.stream.pacing, clock, [&] {
      const stages::translation::TranslationCounts c = t.service->counts();
      return std::pair<long, long>{c.draft_calls, c.final_calls};
    }));
    references.push_back(t.references.at(static_cast<size_t>(r.file)));
    progress.update(std::to_string(traces.size()) + "/" + std::to_string(run.streams.size()) + " streams");
  }
  bench::TranslationSummary summary = bench::summarize_translation(t.target, traces, references);
  progress.done("done: " + std::to_string(summary.segments) + " segments");
  return summary;
}

// The listed terms (those not suppressed) against each stream's committed words.
bench::KeytermSummary keyterm_recall(const SystemResult& r, const std::vector<bench::Utterance>& utts,
                                     const BenchSettings& s) {
  std::vector<std::string> terms, references, hypotheses;
  for (const Keyterm& k : s.keyterms.terms)
    if (k.weight > 0) terms.push_back(k.text);
  for (const bench::FileResult& f : r.files) {
    references.push_back(utts.at(static_cast<size_t>(f.file)).reference);
    hypotheses.push_back(f.hypothesis);
  }
  return bench::score_keyterms(terms, references, hypotheses, s.normalizer);
}

SystemResult run_in_process(const std::string& name, const bench::FileProcessorFactory& factory,
                            const std::vector<std::vector<float>>& audio, const std::vector<bench::Utterance>& utts,
                            const BenchSettings& s, const TranslationBench* translation = nullptr,
                            const DiarizationBench* diarization = nullptr) {
  ProgressLine progress(name);
  const bool own_peak = reset_peak_rss();
  const double cpu0 = cpu_seconds_self();
  std::mutex mutex;
  std::vector<int> done(s.sessions, 0);
  bench::SystemRun run = bench::run_system(factory, audio, s.stream, s.sessions, [&](int session, int d, int total) {
    std::lock_guard<std::mutex> lock(mutex);
    done[session] = d;
    int all = 0;
    for (int x : done) all += x;
    progress.update(std::to_string(all) + "/" + std::to_string(total * s.sessions) + " streams");
  });
  const double cpu = cpu_seconds_self() - cpu0;
  SystemResult r = bench::summarize(name, run, utts, s.stream.pacing, s.normalizer);
  if (!s.keyterms.terms.empty()) r.keyterms = keyterm_recall(r, utts, s);
  r.cpu_seconds = cpu;
  r.peak_rss_bytes = peak_rss_bytes();
  r.peak_rss_scope = own_peak ? "this system (VmHWM reset before it)" : "earshot process so far";
  progress.done("done: " + std::to_string(run.streams.size()) + " streams, " +
                std::to_string(static_cast<int>(r.audio_seconds)) + " s of audio in " +
                std::to_string(static_cast<int>(run.elapsed_wall)) + " s");
  if (translation) r.translation = run_translation(run, *translation, s, name);
  if (diarization) r.diarization = run_diarization(run, audio, utts, *diarization, name);
  return r;
}

fs::path self_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(".") : exe.parent_path();
}

fs::path find_baseline_binary(const std::string& given) {
  if (!given.empty()) return given;
  const fs::path dir = self_dir();
  std::vector<fs::path> candidates = {dir / "earshot-whispercpp-stream", dir / "../../bin/earshot-whispercpp-stream",
                                      dir / "../bin/earshot-whispercpp-stream"};
#ifdef EARSHOT_BUILD_BIN_DIR
  candidates.push_back(fs::path(EARSHOT_BUILD_BIN_DIR) / "earshot-whispercpp-stream");
#endif
  for (const fs::path& c : candidates)
    if (fs::exists(c)) return fs::weakly_canonical(c);
  throw Error(ErrorCode::kIo,
              "the whispercpp-stream baseline needs the earshot-whispercpp-stream binary (built when libwhisper is "
              "found: scripts/bootstrap.sh installs it); not found next to earshot, give --baseline-binary PATH");
}

// The baseline runs in a child process (see whispercpp_stream_main.cpp): same
// audio, same runner, traces read back; CPU time and peak RSS from wait4().
SystemResult run_baseline(const std::string& name, const fs::path& binary, const fs::path& model,
                          const std::vector<std::vector<float>>& audio, const std::vector<bench::Utterance>& utts,
                          const BenchSettings& s, const TranslationBench* translation = nullptr,
                          const DiarizationBench* diarization = nullptr) {
  const fs::path dir = fs::temp_directory_path() / ("earshot-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path audio_file = dir / "audio.f32", trace_file = dir / "run.trace", log_file = dir / "baseline.log";
  bench::write_audio_file(audio_file, audio);
  std::vector<std::string> argv = {binary.string(),
                                   "--model",
                                   model.string(),
                                   "--audio",
                                   audio_file.string(),
                                   "--out",
                                   trace_file.string(),
                                   "--chunk",
                                   std::to_string(s.stream.chunk_seconds),
                                   "--pacing",
                                   bench::to_string(s.stream.pacing),
                                   "--sessions",
                                   std::to_string(s.sessions),
                                   "--threads",
                                   std::to_string(s.threads),
                                   "--language",
                                   s.language == "auto" ? "auto" : s.language};
  if (s.baseline_no_fallback) argv.push_back("--no-fallback");
  if (s.on_cpu) argv.push_back("--cpu");
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(ErrorCode::kIo, "cannot start " + binary.string() + ": " + std::strerror(rc));

  ProgressLine progress(name);
  rusage usage{};
  int status = 0;
  std::streamoff log_pos = 0;
  int streams_done = 0;
  const int total = static_cast<int>(audio.size()) * s.sessions;
  for (;;) {
    const pid_t w = wait4(pid, &status, WNOHANG, &usage);
    std::ifstream log(log_file);
    log.seekg(log_pos);
    std::string line;
    while (std::getline(log, line)) {
      if (log.eof()) break;  // a partial line: read it again next time
      log_pos = log.tellg();
      if (line.rfind("whispercpp-stream: session", 0) == 0) {
        ++streams_done;
        progress.update(std::to_string(streams_done) + "/" + std::to_string(total) + " streams");
      }
    }
    if (w == pid) break;
    if (w < 0) throw Error(ErrorCode::kInternal, std::string("wait4 failed: ") + std::strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto log_tail = [&] {
    std::ifstream log(log_file);
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(log, line)) lines.push_back(line);
    std::string tail;
    for (size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i) tail += "\n  " + lines[i];
    return tail;
  };
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string tail = log_tail();
    fs::remove_all(dir);
    throw Error(ErrorCode::kInternal, name + " failed (" +
                                          (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                             : "signal " + std::to_string(WTERMSIG(status))) +
                                          "); last lines of its log:" + tail);
  }
  std::ifstream trace(trace_file);
  bench::SystemRun run = bench::read_run(trace);
  fs::remove_all(dir);
  SystemResult r = bench::summarize(name, run, utts, s.stream.pacing, s.normalizer);
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  r.peak_rss_bytes = usage.ru_maxrss * 1024L;
  r.peak_rss_scope = "baseline child process (wait4)";
  progress.done("done: " + std::to_string(run.streams.size()) + " streams in " +
                std::to_string(static_cast<int>(run.elapsed_wall)) + " s");
  // The baseline's committed words through the same translation stage as
  // earshot's policies; the child's trace file carries no provisional tails,
  // so the stage drafts over committed source only.
  if (translation) r.translation = run_translation(run, *translation, s, name);
  if (diarization) r.diarization = run_diarization(run, audio, utts, *diarization, name);
  return r;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void write_file(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorCode::kIo, "cannot write '" + path + "'");
  writer(out);
  if (!out) throw Error(ErrorCode::kIo, "error writing '" + path + "'");
}

// --capacity: each session streams the whole dataset as one stream (files back
// to back, session s starting at file s) through the server's session pipeline.
std::vector<float> session_audio(const std::vector<std::vector<float>>& audio, int session) {
  std::vector<float> out;
  for (size_t i = 0; i < audio.size(); ++i) {
    const auto& a = audio[(session + i) % audio.size()];
    out.insert(out.end(), a.begin(), a.end());
  }
  return out;
}

std::vector<bench::TimedWord> session_words(const std::vector<std::vector<float>>& audio,
                                            const std::vector<std::vector<bench::TimedWord>>& words, int session) {
  std::vector<bench::TimedWord> out;
  double offset = 0;
  for (size_t i = 0; i < audio.size(); ++i) {
    const size_t file = (session + i) % audio.size();
    for (bench::TimedWord w : words.at(file)) {
      w.start += offset;
      w.end += offset;
      out.push_back(std::move(w));
    }
    offset += static_cast<double>(audio[file].size()) / kSampleRate;
  }
  return out;
}

// --capacity's sessions open `stages` (null: none) as serve opens a live stream's
// chain (the WhisperLiveKit route: no per-stream parameters), so a diarized
// session runs the loaded stage's source on its shared pool, as serve's do.
bench::CapacityRun run_capacity_once(const engine::Engine& engine, const std::string& policy, const BenchSettings& s,
                                     const BenchInputs& in, const stages::StageChain* chain, int sessions) {
  const CapacitySettings& c = *s.capacity;
  const std::vector<std::vector<float>>& audio = in.audio;
  std::vector<std::vector<float>> streams;
  for (int i = 0; i < sessions; ++i) streams.push_back(session_audio(audio, i));
  bench::CapacityFactory factory = [&](int session) {
    bench::CapacityStream out;
    if (c.profile) out.counters = std::make_shared<bench::ProfileCounters>();
    engine::StreamRequest request;
    request.policy = policy;
    request.language = s.language;
    request.keyterms = s.keyterms;
    request.on_warning = [](const std::string&) {};
    if (out.counters) {
      request.on_pass = bench::profile_passes(out.counters);
      request.wrap_decoder = [counters = out.counters](std::unique_ptr<AsrDecoder> d) {
        return bench::probe_mel(std::move(d), counters);
      };
    }
    if (in.reference_words.empty()) {
      out.processor = engine.open_stream(request);
    } else {
      out.processor =
          bench::open_reference_stream(engine, request, session_words(audio, in.reference_words, session)).processor;
    }
    if (out.counters) out.processor = bench::time_processor(std::move(out.processor), out.counters);
    if (chain) out.stages = chain->open({s.language, {}, true});
    return out;
  };
  bench::CapacityOptions options;
  const WorkerPlan plan = plan_workers(s.workers, engine.capabilities(), s.model.runtime, machine_cores());
  options.workers = plan.workers;
  options.pass_threads = plan.threads;
  options.chunk_seconds = s.stream.chunk_seconds;
  options.stream.max_pending_seconds = c.max_buffered_seconds;
  options.stream.stop_passes = s.workers.stop_passes;
  if (in.vad) {
    options.vad = [vad = in.vad](std::shared_ptr<bench::ProfileCounters> counters) {
      session::VadFactory f = session::silero_vad_factory(vad);
      return counters ? bench::time_vad(std::move(f), std::move(counters)) : f;
    };
  }
  return bench::run_capacity(factory, streams, options);
}

void print_capacity_row(const std::string& name, const bench::CapacityRun& r, const bench::CapacityReport& report) {
  std::printf("%-16s %8d %7d %10.2f %8.2f %9.1f %8.2f %10.0f %8.1f  %s\n", name.c_str(), r.sessions, r.workers,
              r.max_p95_lag(), r.max_lag(), r.skipped_seconds(), r.fairness(),
              r.memory_per_session_bytes() / (1024.0 * 1024.0), r.max_drain_seconds(), report.within(r) ? "yes" : "no");
  if (r.diarized()) {
    const auto delay = [&](double p) {
      const std::optional<double> d = r.speaker_delay(p);
      if (!d) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f s", *d);
      return std::string(buf);
    };
    std::printf(
        "  diarization: p95 lag %.2f s, max lag %.2f s, dropped %.1f s, speaker delay p50 %s p95 %s (%ld words), "
        "compute %.3f s per audio s\n",
        r.max_diarization_p95_lag(), r.max_diarization_lag(), r.diarization_dropped_seconds(), delay(0.5).c_str(),
        delay(0.95).c_str(), r.speaker_delay_words(), r.diarization_compute_per_audio_second());
  }
  for (const auto& f : r.per_session)
    if (!f.error.empty()) std::printf("  session error: %s\n", f.error.c_str());
  if (r.batching)
    std::printf("  batched steps: %lld in %lld graphs (mean batch %.2f; largest since load %lld)\n", r.batching->steps,
                r.batching->graphs, r.batching->mean_batch(), r.batching->max_batch);
}

void print_profile(const std::string& name, const bench::CapacityRun& r) {
  if (!r.profile) return;
  const bench::ProfileSummary p = bench::summarize_profile(*r.profile, r.audio_seconds);
  const bench::StageTimes& ms = p.ms_per_audio_second;
  const double total = ms.total();
  std::printf("profile %s, %d session(s), ms per audio second (share): ", name.c_str(), r.sessions);
  const std::pair<const char*, double> parts[] = {{"mel", ms.mel},         {"vad", ms.vad},
                                                  {"encoder", ms.encoder}, {"decoder", ms.decoder},
                                                  {"policy", ms.policy},   {"protocol", ms.protocol}};
  for (const auto& [what, v] : parts) std::printf("%s %.1f (%.0f%%)  ", what, v, total > 0 ? 100 * v / total : 0.0);
  std::printf("| compute RTF %.3f, %.2f passes/s, %.1f decoder steps/pass, enc %.1f ms/pass, dec %.1f ms/pass\n",
              p.compute_rtf, p.passes_per_second, p.decoder_steps_per_pass, p.encoder_ms_per_pass,
              p.decoder_ms_per_pass);
}

// Seconds as the capacity lines print them: "1", "0.75".
std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

// Runs the N given, or searches: doubling from 1 while within capacity, then
// bisecting between the last N within and the first beyond.
void run_capacity_mode(const engine::Engine& engine, const std::string& name, const std::string& policy,
                       const BenchSettings& s, const BenchInputs& in, const stages::StageChain* chain,
                       bench::CapacityReport& report) {
  const CapacitySettings& c = *s.capacity;
  std::string within_header = "within " + seconds_text(report.lag_limit) + " s";
  if (report.diarization_lag_limit)
    within_header += ", diarization " + seconds_text(*report.diarization_lag_limit) + " s, 0 dropped";
  std::printf("%-16s %8s %7s %10s %8s %9s %8s %10s %8s  %s\n", "system", "sessions", "workers", "p95 lag", "max lag",
              "skipped s", "fairness", "MB/session", "drain s", within_header.c_str());
  auto once = [&](int n) {
    const std::optional<engine::BatchCounts> before = engine.batch_counts();
    bench::CapacityRow row{name, s.threads, s.model.runtime.batch_streams,
                           run_capacity_once(engine, policy, s, in, chain, n)};
    if (before) {
      const engine::BatchCounts after = engine.batch_counts().value_or(*before);
      row.run.batching =
          bench::BatchFigures{after.steps - before->steps, after.graphs - before->graphs, after.max_batch};
    }
    print_capacity_row(name, row.run, report);
    print_profile(name, row.run);
    std::fflush(stdout);
    const bool within = report.within(row.run);
    report.rows.push_back(std::move(row));
    return within;
  };
  if (!c.sessions.empty()) {
    for (int n : c.sessions) once(n);
    return;
  }
  int good = 0, bad = 0;
  for (int n = 1; n <= c.max_sessions; n *= 2) {
    if (once(n)) {
      good = n;
    } else {
      bad = n;
      break;
    }
  }
  if (bad == 0) {
    std::printf("%s: capacity >= %d sessions with %s (--max-sessions)\n", name.c_str(), good,
                report.pass_rule().c_str());
    report.searches.push_back({name, good, true});
    return;
  }
  while (bad - good > 1) {
    const int mid = (good + bad) / 2;
    if (once(mid)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  const WorkerPlan plan = plan_workers(s.workers, engine.capabilities(), s.model.runtime, machine_cores());
  std::printf("%s: capacity %d real-time session(s) with %s (%s, batch-decode %d)\n", name.c_str(), good,
              report.pass_rule().c_str(), plan.describe().c_str(), s.model.runtime.batch_streams);
  report.searches.push_back({name, good, false});
}

// The dataset's readable audio, its utterances into config.utterances (an
// unreadable file is a problem, skipped), and what the workload needs besides:
// the VAD (--workload reference, --capacity) and the reference's word times.
BenchInputs load_inputs(const BenchSettings& s, bench::BenchConfig& config) {
  bench::Dataset dataset = bench::load_dataset(config.dataset);
  BenchInputs in;
  for (bench::Utterance& u : dataset.utterances) {
    try {
      in.audio.push_back(audio::load_file(u.audio_path));
    } catch (const Error& e) {
      dataset.problems.push_back(u.audio_path + ": unreadable audio (" + e.what() + "); file skipped");
      u.id.clear();
      continue;
    }
    u.audio_seconds = static_cast<double>(in.audio.back().size()) / kSampleRate;
    config.utterances.push_back(u);
  }
  const bool reference = s.workload == BenchWorkload::kReference;
  if (reference || s.capacity || s.turns) in.vad = vad::VadModel::load(vad_model_path(s.vad_model));
  if (reference) {
    for (size_t i = 0; i < in.audio.size(); ++i) {
      const bench::Utterance& u = config.utterances[i];
      in.reference_words.push_back(
          bench::estimate_word_times(u.reference, bench::speech_segments(in.vad, in.audio[i]), u.audio_seconds));
    }
  }
  config.dataset_problems = dataset.problems;
  for (const std::string& p : dataset.problems) std::fprintf(stderr, "earshot bench: %s\n", p.c_str());
  if (config.utterances.empty())
    throw Error(ErrorCode::kInvalidArgument, "dataset " + config.dataset + ": no readable audio file left");
  return in;
}

// The chain's translation (--translate-to), measured after each system's run; none without it.
std::optional<TranslationBench> translation_bench(const stages::StageChain& chain, const BenchSettings& s,
                                                  const std::vector<bench::Utterance>& utterances) {
  const auto* loaded = dynamic_cast<const stages::translation::LoadedTranslation*>(chain.find("translation"));
  if (!loaded) return std::nullopt;
  const stages::translation::TranslationSetup* setup = &loaded->setup();
  if (setup->default_target.empty())
    throw Error(ErrorCode::kInvalidArgument, "--translation-model needs --translate-to LANG in bench");
  if (s.capacity) throw Error(ErrorCode::kInvalidArgument, "--translate-to is not measured with --capacity");
  std::shared_ptr<stages::translation::TranslationService> service = setup->service;
  if (s.workload == BenchWorkload::kReference) {
    // The translation LLM's real graphs with the reference translation's
    // choices (bench/translation_reference.h), as the ASR's.
    const stages::translation::TranslationService& loaded_service = *setup->service;
    service = std::make_shared<stages::translation::TranslationService>(
        bench::reference_translation_model(
            loaded_service.shared_model(),
            bench::translation_reference_prompt(loaded_service.model(), s.language, setup->default_target)),
        loaded_service.registry(), 1, loaded_service.defaults());
  }
  return TranslationBench{service, setup->default_target,
                          bench::load_reference_translations(utterances, setup->default_target)};
}

// The p95 diarization lag a diarized capacity run must stay under:
// --diarization-lag-limit, else the source's chunk (--diarization-chunk-ms, in
// whole 80 ms frames, or the model's default) + the ASR's lag limit: a session's
// speakers may wait for one chunk of the model plus the slack its words have (by
// default the client's chunk + 0.5 s). A lone stream's lag already reaches the
// chunk plus one step's compute (~0.5 s for a 4 s chunk of the real model on one
// core), so "+ 0.5 s" alone would fail a machine that keeps up.
double diarization_lag_limit(const CapacitySettings& c, const Args& args, double asr_lag_limit) {
  if (c.diarization_lag_limit > 0) return c.diarization_lag_limit;
  stages::diarization::ModelRequest request;
  request.chunk_ms = static_cast<int>(args.get_int("diarization-chunk-ms"));
  return stages::diarization::sortformer_stream_options(request).chunk_frames * 0.08 + asr_lag_limit;
}

// What every system of a run shares besides the settings: the inputs, the
// stages measured after each, and the reports the results go to.
struct BenchRun {
  const BenchInputs& in;
  const TranslationBench* translation;
  const DiarizationBench* diarization;
  const stages::StageChain* capacity_stages;       // --capacity: every session's chain (null: none)
  const stages::StageChain& chain;                 // every stage loaded (--turns: the turn stage)
  const std::vector<bench::TurnClip>& turn_clips;  // --turns: the dataset's clips (else empty)
  bench::BenchReport& report;
  bench::CapacityReport& capacity_report;
  std::vector<bench::NamedTurnRun>& turn_runs;  // --turns: each system's run
};

// One model's listed policies: loaded once, each policy run (or searched for
// its capacity) in process.
void measure_policies(const fs::path& model_file, const std::string& suffix, bool side_by_side, const BenchSettings& s,
                      BenchRun& run) {
  engine::ModelSpec spec = s.model;
  spec.path = model_file;
  // Side by side (--model whisper.bin,nemotron.gguf --policy alignatt,native): each
  // model runs the listed policies it has, and a family's options (--lookahead-ms)
  // go to the models of that family only. One model alone keeps both strict.
  if (side_by_side) spec.keep_only_family(engine::family_of(model_file));
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);
  std::vector<std::string> own = s.policies;
  if (side_by_side) {
    const std::vector<std::string>& offered = engine->capabilities().policies;
    std::erase_if(own,
                  [&](const std::string& p) { return std::find(offered.begin(), offered.end(), p) == offered.end(); });
    if (own.empty()) own = s.policies;  // none it has: resolve_policy names them below
  }
  for (const std::string& p : own) {
    engine->resolve_policy(p);  // a policy this model lacks fails before the run
    if (s.turns) {
      run.turn_runs.push_back(
          {p + suffix, run_turn_bench(*engine, p + suffix, p, s, run.turn_clips, run.in.vad, run.chain)});
      continue;
    }
    if (s.capacity) {
      run_capacity_mode(*engine, p + suffix, p, s, run.in, run.capacity_stages, run.capacity_report);
      continue;
    }
    SystemResult r = run_in_process(
        p + suffix, [&](int file) { return open_policy_stream(*engine, p, s, run.in, file); }, run.in.audio,
        run.report.config.utterances, s, run.translation, run.diarization);
    const std::string how = engine::describe(engine->capabilities().family, spec, p);
    r.detail = "model " + model_file.string() + ", " + std::to_string(s.threads) + " threads" +
               (how.empty() ? "" : ", " + how) + ", workload " + to_string(s.workload);
    run.report.systems.push_back(std::move(r));
  }
}

// The reports: capacity's files, or the table on stdout and the files asked for.
void write_reports(const BenchSettings& s, const bench::BenchReport& report,
                   const bench::CapacityReport& capacity_report, const std::vector<bench::NamedTurnRun>& turn_runs) {
  if (s.turns) {  // its rows went to stdout as each policy finished
    if (s.json) write_file(*s.json, [&](std::ostream& o) { bench::write_turns_json(o, turn_runs); });
    return;
  }
  if (s.capacity) {
    if (s.json) write_file(*s.json, [&](std::ostream& o) { bench::write_capacity_json(o, capacity_report); });
    if (s.markdown)
      write_file(*s.markdown, [&](std::ostream& o) { bench::write_capacity_markdown(o, capacity_report); });
    return;
  }
  bench::write_table(std::cout, report);
  for (const SystemResult& r : report.systems)
    if (r.failed_streams)
      std::fprintf(stderr, "earshot bench: %s: %ld stream(s) failed; the errors are in --json\n", r.name.c_str(),
                   r.failed_streams);
  if (s.json) write_file(*s.json, [&](std::ostream& o) { bench::write_json(o, report); });
  if (s.markdown) write_file(*s.markdown, [&](std::ostream& o) { bench::write_markdown(o, report); });
  if (s.plot) write_file(*s.plot, [&](std::ostream& o) { bench::write_svg(o, report); });
}

// The run with validated settings: files found, inputs and stages loaded, each
// model's systems measured, the reports written. `args` carries the stages'
// options (read when the chain loads), `argv` the command line for the reports.
int measure(BenchSettings s, const Args& args, const CommandArgs& argv) {
  fs::path baseline_binary;
  if (!s.baselines.empty()) baseline_binary = find_baseline_binary(s.baseline_binary);
  std::vector<fs::path> models;
  for (const std::string& m : s.models) models.push_back(model_path(m));

  bench::BenchReport report;
  bench::BenchConfig& config = report.config;
  config.dataset = s.dataset;
  config.pacing = bench::to_string(s.stream.pacing);
  config.chunk_seconds = s.stream.chunk_seconds;
  config.sessions = s.sessions;
  config.threads = s.threads;
  config.normalizer = bench::to_string(s.normalizer);
  config.started_utc = utc_now();
  config.command_line = "earshot bench";
  for (const std::string& a : argv) config.command_line += " " + a;
  bench::CapacityReport capacity_report;
  capacity_report.dataset = config.dataset;
  capacity_report.command_line = config.command_line;
  capacity_report.started_utc = config.started_utc;
  capacity_report.chunk_seconds = s.stream.chunk_seconds;
  capacity_report.max_buffered_seconds = s.capacity.value_or(CapacitySettings{}).max_buffered_seconds;
  capacity_report.lag_limit = s.lag_limit();

  const BenchInputs in = load_inputs(s, config);
  // The stages bench measures: the translation (chrF and its calls against the references), the
  // diarization (DER against AUDIO.rttm truths, and its compute).
  const stages::StageChain chain =
      stages::StageChain::load(args, {.command = stages::Command::kBench, .pause_seconds = 5.0, .threads = s.threads});
  // --capacity runs the diarization live in every session (its lag, drops and
  // speaker delays beside the ASR's); without it, each stream after its ASR run.
  const std::optional<DiarizationBench> diarization =
      s.capacity ? std::nullopt : diarization_bench(chain, args, config.utterances, s.language, s.threads);
  if (s.capacity && chain.find("diarization"))
    capacity_report.diarization_lag_limit = diarization_lag_limit(*s.capacity, args, s.lag_limit());
  const std::optional<TranslationBench> translation = translation_bench(chain, s, config.utterances);
  if (translation) s.stream.keep_tails = true;  // the translation's drafts read each emission's provisional words
  std::vector<bench::TurnClip> turn_clips;
  std::vector<bench::NamedTurnRun> turn_runs;
  if (s.turns) {
    std::vector<std::string> ids;
    for (const bench::Utterance& u : config.utterances) ids.push_back(u.id);
    turn_clips = cli::turn_clips(in.audio, ids, in.reference_words, in.vad, *s.turns);
  }

  BenchRun run{in,
               translation ? &*translation : nullptr,
               diarization ? &*diarization : nullptr,
               s.capacity && !chain.empty() ? &chain : nullptr,
               chain,
               turn_clips,
               report,
               capacity_report,
               turn_runs};
  for (const fs::path& model_file : models) {
    const std::string suffix = models.size() > 1 ? " (" + model_file.stem().string() + ")" : "";
    if (!s.policies.empty()) measure_policies(model_file, suffix, models.size() > 1, s, run);
    for (const std::string& b : s.baselines) {
      SystemResult r = run_baseline(b + suffix, baseline_binary, model_file, in.audio, config.utterances, s,
                                    run.translation, run.diarization);
      r.detail = "libwhisper, model " + model_file.string() +
                 ", step 3 s, length 10 s, keep 0.2 s, greedy, flash attention" +
                 (s.baseline_no_fallback ? ", no temperature fallback" : ", temperature fallback");
      report.systems.push_back(std::move(r));
    }
  }
  write_reports(s, report, capacity_report, turn_runs);
  return 0;
}

}  // namespace

int run_bench(const CommandArgs& argv) {
  Args args("bench", BenchSettings::kUsage);
  BenchSettings::declare(args);
  std::optional<BenchSettings> settings = BenchSettings::parse(args, argv);
  if (!settings) return 0;
  return measure(std::move(*settings), args, argv);
}

}  // namespace earshot::cli

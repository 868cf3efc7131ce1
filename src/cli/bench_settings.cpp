#include "cli/bench_settings.h"

#include <exception>
#include <string>

#include "cli/keyterm_options.h"
#include "common/error.h"
#include "engine/model_options.h"
#include "session/stream_session.h"
#include "stages/registry.h"

namespace earshot::cli {
namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// --capacity's own options; the flags that go only without it are refused here.
CapacitySettings read_capacity(const Args& args) {
  CapacitySettings capacity;
  if (args.get("sessions") != "auto") {
    for (const std::string& n : split_list(args.get("sessions"))) {
      size_t used = 0;
      int value = 0;
      try {
        value = std::stoi(n, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != n.size())
        refuse("--sessions takes auto, N or N1,N2,... with --capacity (got '" + args.get("sessions") + "')");
      capacity.sessions.push_back(value);
    }
  }
  for (int n : capacity.sessions)
    if (n < 1) refuse("--sessions must be >= 1");
  capacity.max_sessions = static_cast<int>(args.get_int("max-sessions"));
  capacity.profile = args.get_flag("profile");
  if (capacity.max_sessions < 1) refuse("--max-sessions must be >= 1");
  if (args.get_flag("as-fast-as-possible")) refuse("--capacity runs in real time (drop --as-fast-as-possible)");
  capacity.max_buffered_seconds = args.get_double("max-buffered-seconds");
  const double max_step = session::StreamOptions{}.max_step_seconds;
  if (capacity.max_buffered_seconds < 0 ||
      (capacity.max_buffered_seconds > 0 && capacity.max_buffered_seconds < max_step))
    refuse("--max-buffered-seconds must be 0 (unbounded) or at least " + std::to_string(static_cast<int>(max_step)) +
           " (the most audio one step takes)");
  if (args.has("plot"))
    refuse("--plot draws word delays, which --capacity does not measure (use --json or --markdown)");
  if (args.has("lag-limit")) {
    capacity.lag_limit = args.get_double("lag-limit");
    if (!(capacity.lag_limit > 0)) refuse("--lag-limit must be > 0 seconds");
  }
  if (args.has("diarization-lag-limit")) {
    if (!args.has("diarization-model")) refuse("--diarization-lag-limit needs --diarization-model PATH|NAME");
    capacity.diarization_lag_limit = args.get_double("diarization-lag-limit");
    if (!(capacity.diarization_lag_limit > 0)) refuse("--diarization-lag-limit must be > 0 seconds");
  }
  return capacity;
}

std::optional<std::string> given(const Args& args, const std::string& name) {
  return args.has(name) ? std::optional<std::string>(args.get(name)) : std::nullopt;
}

}  // namespace

const char* to_string(BenchWorkload workload) { return workload == BenchWorkload::kReference ? "reference" : "model"; }

void BenchSettings::declare(Args& args) {
  args.option("dataset", "folder of audio files with same-name .txt references, or a manifest (AUDIO<TAB>TEXT)")
      .option("model", "model file(s), comma-separated (or names known to `earshot pull`)")
      .option("policy", "earshot policies to measure, comma-separated (" + engine::policy_lists() + "; none)",
              "alignatt")
      .option("baseline", "baselines, comma-separated: whispercpp-stream, or none", "none")
      .flag("realtime", "feed audio at real-time pace (delays on the wall clock, computation included)")
      .flag("as-fast-as-possible", "feed audio back to back (delays on the audio clock; the default)")
      .option("chunk", "seconds of audio per insert (the server's chunking)", "0.5")
      .option("sessions", "concurrent sessions, each streaming the whole dataset (--capacity: N, N1,N2,..., or auto)",
              "1")
      .option("language", "language code, or auto", "en")
      .option("normalizer", "text normaliser before scoring: english, basic or none", "english")
      .option("workload",
              "model (the model's own tokens) or reference (real graphs, reference tokens: Whisper's decoder, "
              "Qwen3-ASR's AlignAtt or a streaming transducer's greedy choices; with --translate-to the translation "
              "LLM's too, which copies its source; docs/benchmarks.md)",
              "model")
      .option("vad-model", "Silero VAD weights (ggml) for --workload reference's word times; default: the model cache")
      .flag("capacity", "real-time sessions through the server's pipeline (VAD, scheduler, protocol): lag per N")
      .option(
          "turns",
          "measure end-of-turn delays instead (multi-turn or two-speaker: turns made from the dataset's files; "
          "real time, 20 ms frames, --sessions streams at once): end of speech to VAD end, final text, end of turn; "
          "false ends inside pauses",
          "")
      .option("turn-stagger",
              "--turns: seconds stream N starts after stream N - 1 (0: every stream's last turn ends at the same "
              "moment, the worst case for a shared machine)",
              "1")
      .option("max-sessions", "--capacity with --sessions auto: the largest N tried", "64")
      .option("max-buffered-seconds",
              "--capacity: audio waiting per stream beyond which the oldest is skipped (the server's option)", "60")
      .flag("profile", "--capacity: split each stream's compute into mel, VAD, encoder, decoder, policy, protocol")
      .option("lag-limit", "--capacity: the p95 lag (s) every session must stay under; default the chunk + 0.5 s")
      .option("diarization-lag-limit",
              "--capacity with --diarization-model: the p95 diarization lag (s) every session must stay under; "
              "default the diarization chunk + --lag-limit's value")
      .flag("baseline-no-fallback", "whispercpp-stream without temperature fallback (stream.cpp -nf)")
      .option("baseline-binary", "path of earshot-whispercpp-stream (default: next to earshot)")
      .option("json", "write every number as JSON to this file")
      .option("markdown", "write a Markdown summary to this file")
      .option("plot", "write an SVG plot of the delay distributions to this file");
  declare_worker_options(args, "--capacity and --turns: scheduler worker threads (the server's --workers)");
  declare_keyterm_options(args);
  engine::declare_model_options(args, CommandKind::kBench);
  stages::StageChain::declare(args, stages::Command::kBench);
}

std::optional<BenchSettings> BenchSettings::parse(Args& args, const CommandArgs& argv) {
  if (!args.parse_or_help(argv, {.required = {"dataset", "model"}})) return std::nullopt;
  return read(args);
}

BenchSettings BenchSettings::read(const Args& args) {
  if (args.get_flag("realtime") && args.get_flag("as-fast-as-possible"))
    refuse("--realtime and --as-fast-as-possible exclude each other");
  BenchSettings s;
  s.dataset = args.get("dataset");
  s.stream.chunk_seconds = args.get_double("chunk");
  if (!(s.stream.chunk_seconds > 0)) refuse("--chunk must be > 0 seconds");
  s.stream.pacing = args.get_flag("realtime") ? bench::Pacing::kRealtime : bench::Pacing::kAsFastAsPossible;
  if (args.get_flag("capacity")) {
    s.capacity = read_capacity(args);
  } else if (args.get_flag("profile")) {
    refuse("--profile goes with --capacity (it needs the server's pipeline)");
  } else if (args.has("lag-limit")) {
    refuse("--lag-limit goes with --capacity");
  } else if (args.has("diarization-lag-limit")) {
    refuse("--diarization-lag-limit goes with --capacity");
  } else if (args.has("diarization-workers")) {
    refuse("--diarization-workers goes with --capacity (without it each stream is diarized in order, after its ASR)");
  }
  if (!args.get("turns").empty()) {
    if (s.capacity) refuse("--turns and --capacity are separate runs: give one");
    if (args.get_flag("as-fast-as-possible")) refuse("--turns runs in real time (drop --as-fast-as-possible)");
    s.turns = bench::parse_turn_dataset_kind(args.get("turns"));
    s.turn_stagger = args.get_double("turn-stagger");
    if (args.has("markdown") || args.has("plot")) refuse("--turns writes its report with --json only");
    if (!(s.turn_stagger >= 0) || s.turn_stagger > 60) refuse("--turn-stagger must be 0 to 60 seconds");
  } else if (args.has("turn-stagger")) {
    refuse("--turn-stagger goes with --turns");
  }
  s.sessions = s.capacity ? 1 : static_cast<int>(args.get_int("sessions"));
  if (s.sessions < 1) refuse("--sessions must be >= 1");
  s.threads = engine::read_threads(args);
  s.workers = read_worker_request(args);
  s.language = args.get("language");
  s.normalizer = bench::parse_normalizer_kind(args.get("normalizer"));
  s.model = engine::read_model_spec(args, CommandKind::kBench);  // a bad --device fails before any work
  s.keyterms = read_keyterms(args, s.model.policies.alignatt);
  s.model.policies.keyterm_bonus = read_keyterm_bonus(args);
  s.on_cpu = s.model.runtime.device.empty();
  s.baseline_no_fallback = args.get_flag("baseline-no-fallback");

  for (const std::string& p : split_list(args.get("policy"))) {
    // Which policies exist depends on the model's family (engine::policy_lists()): each
    // engine checks the names before its runs.
    if (p != "none") s.policies.push_back(p);
  }
  for (const std::string& b : split_list(args.get("baseline"))) {
    if (b == "none") continue;
    if (b != "whispercpp-stream") refuse("unknown --baseline '" + b + "' (use whispercpp-stream or none)");
    s.baselines.push_back(b);
  }
  if (s.policies.empty() && s.baselines.empty()) refuse("nothing to measure");
  const std::string workload = args.get("workload");
  if (workload != "model" && workload != "reference") refuse("--workload must be model or reference");
  s.workload = workload == "reference" ? BenchWorkload::kReference : BenchWorkload::kModel;
  if (s.workload == BenchWorkload::kReference && s.model.policies.alignatt.beams != 1)
    refuse("--workload reference decodes greedily: use --beams 1");
  if (s.capacity && !s.baselines.empty()) refuse("--capacity measures earshot's policies; drop --baseline");
  if (s.turns && !s.baselines.empty()) refuse("--turns measures earshot's policies; drop --baseline");
  s.baseline_binary = args.get("baseline-binary");
  s.models = split_list(args.get("model"));
  s.vad_model = args.get("vad-model");
  s.json = given(args, "json");
  s.markdown = given(args, "markdown");
  s.plot = given(args, "plot");
  return s;
}

double BenchSettings::lag_limit() const {
  return capacity && capacity->lag_limit > 0 ? capacity->lag_limit : stream.chunk_seconds + 0.5;
}

}  // namespace earshot::cli

// `earshot bench`'s command line as settings: its options declared on Args, then
// read and checked into typed fields before anything is loaded (the dataset, a
// model, the VAD, a stage, the baseline binary), so every refusal that needs no
// file (flag combinations, ranges) happens here and names the flag the user
// typed. The model families' options come from the family registry
// (engine::read_model_spec); the stages' (translation, diarization) are declared
// here and read when bench loads them (stages::StageChain::load).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/normalizer.h"
#include "bench/runner.h"
#include "bench/turns.h"
#include "cli/commands.h"
#include "cli/worker_plan.h"
#include "common/command_line.h"
#include "common/keyterms.h"
#include "engine/model_spec.h"

namespace earshot::cli {

// --workload: the model's own tokens, or real graphs steered by the reference's
// (bench/reference_workload.h).
enum class BenchWorkload { kModel, kReference };
const char* to_string(BenchWorkload workload);  // "model", "reference"

// --capacity: each session streams the whole dataset as one stream (files back
// to back, session s starting at file s) through the server's session pipeline.
struct CapacitySettings {
  bool profile = false;
  std::vector<int> sessions;  // the N to run; empty = search (--sessions auto)
  int max_sessions = 64;
  double max_buffered_seconds = 60;  // the server's --max-buffered-seconds
  double lag_limit = 0;              // --lag-limit; 0: the chunk + 0.5 s
  // --diarization-lag-limit (with --diarization-model); 0: the diarization source's chunk + the ASR's lag limit.
  double diarization_lag_limit = 0;
};

struct BenchSettings {
  static constexpr const char* kUsage =
      "earshot bench --dataset DIR --model M[,M2...] [--policy alignatt,localagreement] "
      "[--baseline whispercpp-stream] [--realtime|--as-fast-as-possible] [options]";

  // Every option of `earshot bench`: its own, AlignAtt's, the model families' and the stages'.
  static void declare(Args& args);
  // args (declared) parsed from argv with bench's rules (--dataset and --model
  // required), then read(); nullopt when --help was asked for (and printed).
  static std::optional<BenchSettings> parse(Args& args, const CommandArgs& argv);
  // The parsed options read and validated. Throws earshot::Error(kInvalidArgument)
  // naming the option for a bad value or combination; loads nothing.
  static BenchSettings read(const Args& args);

  std::string dataset;              // --dataset
  std::vector<std::string> models;  // --model: names or paths as given, resolved when loaded
  // --policy without "none": which exist depends on each model's family (checked when it loads).
  std::vector<std::string> policies;
  std::vector<std::string> baselines;  // --baseline without "none": whispercpp-stream
  std::string baseline_binary;         // --baseline-binary; "" = next to earshot
  bool baseline_no_fallback = false;
  bench::StreamOptions stream;  // --chunk and the pacing (--realtime)
  int sessions = 1;             // concurrent sessions of a run (1 with --capacity, which has its own)
  int threads = 4;
  std::string language;
  // --keyterms (and --static-init-prompt): every stream's vocabulary; the report adds
  // the listed terms' recall in the committed words (bench/keyterm_recall.h).
  Keyterms keyterms;
  bench::NormalizerKind normalizer = bench::NormalizerKind::kEnglish;
  engine::ModelSpec model;  // runtime, each family's options, beams and the other AlignAtt settings; no path
  bool on_cpu = false;      // --device resolved to the CPU: the baseline stays there too
  BenchWorkload workload = BenchWorkload::kModel;
  std::string vad_model;                            // --vad-model; "" = the model cache's
  std::optional<CapacitySettings> capacity;         // --capacity
  std::optional<std::string> json, markdown, plot;  // the report files (--json, --markdown, --plot)
  // --turns: the delays from each end of speech to its final text and end of turn (bench/turns.h),
  // over --sessions streams of this turn dataset at once, on --workers scheduler threads.
  std::optional<bench::TurnDatasetKind> turns;
  // --turn-stagger: stream N starts this many seconds after stream N - 1 (independent
  // speakers' turns end at different moments; 0 ends every stream's last turn together).
  double turn_stagger = 1.0;
  // --workers, --threads, --lend-cores (--capacity and --turns: as serve plans them, cli/worker_plan.h).
  WorkerRequest workers;

  // The p95 lag a capacity run must stay under: --lag-limit, else the chunk + 0.5 s
  // (1 s at the default 0.5 s chunk).
  double lag_limit() const;
};

}  // namespace earshot::cli

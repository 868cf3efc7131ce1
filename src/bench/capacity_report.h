// What `earshot bench --capacity` keeps of its runs: every run of N sessions
// with its per-session figures and profile, and each search's answer, written
// with --json (every number) and --markdown (one table row per run).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/capacity.h"

namespace earshot::bench {

// The figures --profile derives from a run's summed stage times.
struct ProfileSummary {
  StageTimes ms_per_audio_second;  // each stage's milliseconds per second of audio (counts copied)
  double compute_rtf = 0;          // compute seconds (all stages) per audio second
  double passes_per_second = 0;    // encoder passes per audio second
  double decoder_steps_per_pass = 0;
  double encoder_ms_per_pass = 0;  // encoder + its mel, per pass
  double decoder_ms_per_pass = 0;
  double encoder_share = 0;  // of all compute, 0..1
};
ProfileSummary summarize_profile(const StageTimes& times, double audio_seconds);

struct CapacityRow {
  std::string system;  // the policy (and the model, when several)
  int threads = 0;     // ggml threads per model pass
  int batch_decode = 0;
  CapacityRun run;
};

// The answer of one `--sessions auto` search.
struct CapacitySearch {
  std::string system;
  int capacity = 0;                   // the largest N within the lag limit
  bool reached_max_sessions = false;  // every N tried up to --max-sessions was within
};

struct CapacityReport {
  std::string dataset, command_line, started_utc;
  double chunk_seconds = 0;
  double lag_limit = 1.0;  // the p95 lag a run must stay under (earshot bench: the chunk + 0.5 s, or --lag-limit)
  double max_buffered_seconds = 0;  // audio waiting per stream beyond which the oldest is skipped
  // With a diarization stage: the p95 of its lag a run must stay under (earshot
  // bench: the source's chunk + the ASR's lag limit, or --diarization-lag-limit); nullopt without.
  std::optional<double> diarization_lag_limit;
  std::vector<CapacityRow> rows;
  std::vector<CapacitySearch> searches;

  // The pass rule of a run (CapacityRun::within with these limits): every
  // session error-free, nothing skipped, its p95 lag under lag_limit and, with
  // diarization, its diarization p95 lag under diarization_lag_limit and no
  // diarization audio dropped.
  bool within(const CapacityRun& run) const;
  // The rule in words, as the reports' headers and JSON config state it.
  std::string pass_rule() const;
};

void write_capacity_json(std::ostream& out, const CapacityReport& report);
void write_capacity_markdown(std::ostream& out, const CapacityReport& report);

}  // namespace earshot::bench

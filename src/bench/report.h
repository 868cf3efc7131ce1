// Report writers: terminal table, JSON with every number, Markdown summary,
// and a hand-written SVG of the delay distributions (box plots per system).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/metrics.h"
#include "common/json_text.h"  // json_quote, used by the writers and their tests

namespace earshot::bench {

struct BenchConfig {
  std::string dataset;
  std::string pacing;  // "realtime" / "as-fast-as-possible"
  double chunk_seconds = 0.5;
  int sessions = 1;
  int threads = 0;
  std::string normalizer;
  std::string command_line;
  std::string started_utc;  // ISO 8601
  std::vector<std::string> dataset_problems;
  std::vector<Utterance> utterances;
};

struct BenchReport {
  BenchConfig config;
  std::vector<SystemResult> systems;
};

// One row per system: WER, CER, delays, RTF, per-pass times, RSS, lag.
void write_table(std::ostream& out, const BenchReport& report);
void write_json(std::ostream& out, const BenchReport& report);
void write_markdown(std::ostream& out, const BenchReport& report);
void write_svg(std::ostream& out, const BenchReport& report);

}  // namespace earshot::bench

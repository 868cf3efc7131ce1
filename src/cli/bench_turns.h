// `earshot bench --turns multi-turn|two-speaker`: the delay from each end of speech
// to its final text and its end-of-turn event (bench/turns.h), per policy, with
// --sessions streams at once in real time (20 ms frames) through the session
// pipeline and the turn stage as serve runs them (--eot-threshold...).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/turns.h"
#include "cli/bench_settings.h"
#include "engine/engine.h"
#include "stages/registry.h"
#include "vad/vad.h"

namespace earshot::cli {

// The dataset's clips (audio and Silero's speech segments): for two-speaker the
// longest file, cut into phrases at its pauses of 0.4 s or more, is one speaker and
// every other file the other.
// `words`: each file's reference words with times (--workload reference; empty: none).
std::vector<bench::TurnClip> turn_clips(const std::vector<std::vector<float>>& audio,
                                        const std::vector<std::string>& ids,
                                        const std::vector<std::vector<bench::TimedWord>>& words,
                                        const std::shared_ptr<const vad::VadModel>& vad, bench::TurnDatasetKind kind);

// Runs `policy` of `engine` over the dataset (session s starting at clip s, s x
// --turn-stagger seconds after session 0) and prints one row: turns, the p50/p95 of
// each delay, false ends per pause, missed ends. Returns the run (--json writes it).
bench::TurnRun run_turn_bench(const engine::Engine& engine, const std::string& name, const std::string& policy,
                              const BenchSettings& s, const std::vector<bench::TurnClip>& clips,
                              const std::shared_ptr<const vad::VadModel>& vad, const stages::StageChain& chain);

}  // namespace earshot::cli

// How serve and bench (--capacity, --turns) spread the streams' model work over
// the machine: worker threads (sessions whose passes run at once), threads per
// pass, and the cores a lone pass may borrow from idle workers
// (session::PassThreadPolicy). --workers auto and --threads auto (the defaults)
// choose them from the cores and the model family:
//   - on the CPU, unbatched: one worker per core and one thread per pass; a pass
//     with nothing waiting behind it takes every idle core (--lend-cores on), so
//     a lone stream's pass (the flush at the end of a turn) runs on all of them
//     while several streams run side by side. Given --threads T: cores / T
//     workers; given --workers W: cores / W threads.
//   - a family whose passes run one at a time (Serial: Qwen3-ASR's shared libmtmd
//     encoder), a GPU, or --batch-decode: one worker (N with --batch-decode N, so
//     that N steps can wait to be batched), each backend on --threads (auto: the
//     cores, at most 8), nothing lent.
#pragma once

#include <optional>
#include <string>

#include "common/command_line.h"
#include "engine/engine.h"
#include "engine/model_spec.h"
#include "session/scheduler.h"

namespace earshot::cli {

struct WorkerRequest {
  std::optional<int> workers;  // --workers N; nullopt: auto
  std::optional<int> threads;  // --threads N; nullopt: auto
  bool lend_cores = true;      // --lend-cores on | off
  bool stop_passes = true;     // --stop-passes on | off (session::StreamOptions::stop_passes)
};

struct WorkerPlan {
  int workers = 1;
  session::PassThreadPolicy threads;  // {0, 0}: each backend keeps the spec's threads
  // "2 workers x 1 thread per pass, a lone pass up to 2 (auto)"
  std::string describe() const;
};

// --workers, --threads, --lend-cores and --stop-passes on Args (the commands that serve many streams).
void declare_worker_options(Args& args, const std::string& workers_help);
// Throws Error(kInvalidArgument) naming the option for a value below 1 or not auto.
WorkerRequest read_worker_request(const Args& args);

// The plan for `request` on `cores` CPU cores (>= 1) with the model `engine` loaded as `runtime` says.
WorkerPlan plan_workers(const WorkerRequest& request, const engine::Capabilities& model,
                        const engine::RuntimeOptions& runtime, int cores);
// std::thread::hardware_concurrency(), at least 1.
int machine_cores();

}  // namespace earshot::cli

#include "cli/worker_plan.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/error.h"

namespace earshot::cli {

namespace {

std::optional<int> read_count(const Args& args, const std::string& name) {
  const std::string value = args.get(name);
  if (value == "auto") return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < 1 || n > 4096)
    throw Error(ErrorCode::kInvalidArgument, "--" + name + " must be auto or 1..4096");
  return static_cast<int>(n);
}

}  // namespace

void declare_worker_options(Args& args, const std::string& workers_help) {
  args.option("threads",
              "CPU threads per model pass, or auto: 1 with a worker per core where the model's passes run side by "
              "side (a lone pass then borrows the idle cores), else the cores (at most 8)",
              "auto")
      .option("workers",
              workers_help +
                  ", or auto: the cores / --threads (1 for a model whose passes run one at "
                  "a time, N with --batch-decode N)",
              "auto")
      .option("lend-cores",
              "on: a pass with no other session waiting runs on the idle workers' cores too (never more than "
              "--workers x --threads, never past the machine's); off: every pass on --threads",
              "on")
      .option("stop-passes",
              "on: a model pass in flight stops when the speaker stops or another stream's flush needs the cores; off: "
              "every pass runs to its end (with --vac-chunk-size = --max-step-seconds a stream's words then depend on "
              "its audio only)",
              "on");
}

WorkerRequest read_worker_request(const Args& args) {
  WorkerRequest r;
  r.workers = read_count(args, "workers");
  r.threads = read_count(args, "threads");
  r.lend_cores = args.get_on_off("lend-cores");
  r.stop_passes = args.get_on_off("stop-passes");
  return r;
}

int machine_cores() { return std::max(1u, std::thread::hardware_concurrency()); }

WorkerPlan plan_workers(const WorkerRequest& request, const engine::Capabilities& model,
                        const engine::RuntimeOptions& runtime, int cores) {
  cores = std::max(1, cores);
  WorkerPlan plan;
  const bool cpu = runtime.device.empty();
  if (!cpu || model.serial_passes || runtime.batch_streams > 0) {
    // Each backend keeps runtime.threads; workers as asked, or what batching can use.
    plan.workers = request.workers.value_or(runtime.batch_streams > 0 ? runtime.batch_streams : 1);
    return plan;
  }
  const int per_pass = request.threads.value_or(request.workers ? std::max(1, cores / *request.workers) : 1);
  plan.workers = request.workers.value_or(std::max(1, cores / per_pass));
  plan.threads.threads = per_pass;
  plan.threads.max_threads =
      request.lend_cores ? std::max(per_pass, std::min(cores, plan.workers * per_pass)) : per_pass;
  return plan;
}

std::string WorkerPlan::describe() const {
  std::string out = std::to_string(workers) + (workers == 1 ? " worker" : " workers");
  if (threads.threads == 0) return out + ", each pass on the model's threads";
  out += " x " + std::to_string(threads.threads) + (threads.threads == 1 ? " thread" : " threads") + " per pass";
  if (threads.max_threads > threads.threads) out += ", a lone pass up to " + std::to_string(threads.max_threads);
  return out;
}

}  // namespace earshot::cli

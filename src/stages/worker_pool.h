// A fixed set of threads running stages' model work (translation's calls,
// diarization's chunks): jobs in submission order; a stage keeps its own jobs
// one at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace earshot::stages {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  void submit(std::function<void()> job);
  size_t queued() const;
  // Blocks until no job is queued or running.
  void wait_idle() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace earshot::stages

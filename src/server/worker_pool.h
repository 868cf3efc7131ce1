// Threads for the blocking HTTP routes (a whole file through the model): at most
// `max_threads`, started on demand and joined by stop(), so no request outlives
// the server on a detached thread. Jobs arrive holding a session slot, so with
// max_threads = --max-sessions a job never waits for a thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace earshot::server {

class WorkerPool {
 public:
  explicit WorkerPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `job`; false once stop() began (the job is dropped).
  bool post(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    jobs_.push_back(std::move(job));
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
    wake_.notify_one();
    return true;
  }

  // Jobs queued or running.
  size_t in_flight() const {
    std::lock_guard lock(mutex_);
    return jobs_.size() + running_;
  }
  size_t threads() const {
    std::lock_guard lock(mutex_);
    return threads_.size();
  }

  // Runs what is queued, then joins every thread. Idempotent.
  void stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      threads.swap(threads_);
    }
    wake_.notify_all();
    for (std::thread& t : threads) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping and drained
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
      lock.unlock();
      job();
      job = nullptr;  // what it captured dies off the lock, before the count drops
      lock.lock();
      --running_;
    }
  }

  const size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  size_t running_ = 0;
  bool stopping_ = false;
};

}  // namespace earshot::server

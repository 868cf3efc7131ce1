#include "stages/worker_pool.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace earshot::stages {

struct WorkerPool::State {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  int running = 0;
  std::condition_variable idle;  // no job queued or running
  bool stopping = false;
  std::vector<std::thread> threads;
};

WorkerPool::WorkerPool(int threads) : state_(std::make_shared<State>()) {
  for (int i = 0; i < std::max(1, threads); ++i)
    state_->threads.emplace_back([s = state_.get()] {
      std::unique_lock lock(s->mutex);
      for (;;) {
        s->wake.wait(lock, [&] { return s->stopping || !s->jobs.empty(); });
        if (s->jobs.empty()) return;  // stopping with nothing left
        std::function<void()> job = std::move(s->jobs.front());
        s->jobs.pop_front();
        ++s->running;
        lock.unlock();
        job();
        lock.lock();
        if (--s->running == 0 && s->jobs.empty()) s->idle.notify_all();
      }
    });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  for (std::thread& t : state_->threads) t.join();
}

void WorkerPool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(state_->mutex);
    state_->jobs.push_back(std::move(job));
  }
  state_->wake.notify_one();
}

void WorkerPool::wait_idle() const {
  std::unique_lock lock(state_->mutex);
  state_->idle.wait(lock, [s = state_.get()] { return s->jobs.empty() && s->running == 0; });
}

size_t WorkerPool::queued() const {
  std::lock_guard lock(state_->mutex);
  return state_->jobs.size();
}

}  // namespace earshot::stages

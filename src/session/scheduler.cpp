#include "session/scheduler.h"

#include <algorithm>

#include "common/pass_threads.h"

namespace earshot::session {

Scheduler::Scheduler(int workers, PassThreadPolicy threads) : pass_threads_(threads) {
  workers = std::max(1, workers);
  pass_threads_.threads = std::max(0, pass_threads_.threads);
  pass_threads_.max_threads = std::max(pass_threads_.threads, pass_threads_.max_threads);
  free_threads_ = workers * pass_threads_.threads;
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  // The queued sessions go now, on the caller's thread (their listeners may hold
  // what the caller is about to tear down).
  std::deque<std::shared_ptr<StreamSession>> urgent, ready;
  {
    std::lock_guard lock(mutex_);
    urgent.swap(urgent_);
    ready.swap(ready_);
    scheduled_.clear();
  }
}

void Scheduler::notify(const std::shared_ptr<StreamSession>& session) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (scheduled_.count(session.get())) {
      // Queued before it became urgent (a finalize since): it moves up.
      if (!session->urgent()) return;
      auto at = std::find(ready_.begin(), ready_.end(), session);
      if (at == ready_.end()) return;  // running, or queued as urgent already
      ready_.erase(at);
      urgent_.push_back(session);
      return;
    }
    if (!session->has_work()) return;
    scheduled_.insert(session.get());
    enqueue_locked(session);
  }
  wake_.notify_one();
}

void Scheduler::enqueue_locked(std::shared_ptr<StreamSession> session) {
  (session->urgent() ? urgent_ : ready_).push_back(std::move(session));
}

bool Scheduler::wait_done(const StreamSession& session, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return stepped_.wait_until(lock, deadline, [&] { return session.done(); });
}

void Scheduler::wake_waiters() {
  { std::lock_guard lock(mutex_); }  // a waiter between its check and its wait gets the notification
  stepped_.notify_all();
}

size_t Scheduler::queued() const {
  std::lock_guard lock(mutex_);
  return urgent_.size() + ready_.size();
}

int64_t Scheduler::lent_steps() const {
  std::lock_guard lock(mutex_);
  return lent_steps_;
}

size_t Scheduler::busy() const {
  std::lock_guard lock(mutex_);
  return scheduled_.size();
}

bool Scheduler::wait_busy(const std::function<bool(size_t busy)>& condition,
                          std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return stepped_.wait_until(lock, deadline, [&] { return condition(scheduled_.size()); });
}

void Scheduler::run() {
  const int per_pass = pass_threads_.threads;
  std::unique_lock lock(mutex_);
  for (;;) {
    // A worker starts a step only with its share of the cores free (a lent pass
    // gives them back when it ends).
    wake_.wait(lock, [&] { return stopping_ || ((!urgent_.empty() || !ready_.empty()) && free_threads_ >= per_pass); });
    if (stopping_) return;
    std::deque<std::shared_ptr<StreamSession>>& queue = urgent_.empty() ? ready_ : urgent_;
    std::shared_ptr<StreamSession> session = std::move(queue.front());
    queue.pop_front();
    // Nothing waiting behind it: the idle workers' cores go to this pass.
    int threads = per_pass;
    if (urgent_.empty() && ready_.empty()) threads = std::min(free_threads_, pass_threads_.max_threads);
    free_threads_ -= threads;
    const bool lent = threads > per_pass;
    if (lent) ++lent_steps_;
    lock.unlock();
    {
      PassThreads scope(threads);  // 0 (no policy): each backend keeps its own
      session->step();
    }
    lock.lock();
    free_threads_ += threads;
    // Checked under the scheduler lock so a notify() racing with this step is never lost.
    if (!stopping_ && session->has_work()) {
      enqueue_locked(std::move(session));
      wake_.notify_one();
    } else {
      scheduled_.erase(session.get());
    }
    // Workers that waited for the lent cores may go on now.
    if (lent) wake_.notify_all();
    stepped_.notify_all();
  }
}

}  // namespace earshot::session

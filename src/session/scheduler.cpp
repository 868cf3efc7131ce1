#include "session/scheduler.h"

#include <algorithm>

#include "common/pass_stop.h"
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
      note_way_locked();
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
  note_way_locked();
}

void Scheduler::note_way_locked() { way_asked_.store(!urgent_.empty() || making_way_ > 0, std::memory_order_release); }

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

namespace {
// How often a worker's pass lets the waiting sessions' VADs hear (a VAD window is 32 ms).
constexpr std::chrono::milliseconds kListenEvery{8};
// The most a flush waits for the cores of the steps whose passes stop for it (a
// pass stops at its next node, about a millisecond; the mel spectrogram before
// its graphs takes longer).
constexpr std::chrono::milliseconds kMakeWay{30};
}  // namespace

void Scheduler::promote_urgent_locked() {
  for (auto it = ready_.begin(); it != ready_.end();) {
    if ((*it)->urgent()) {
      urgent_.push_back(std::move(*it));
      it = ready_.erase(it);
    } else {
      ++it;
    }
  }
  note_way_locked();
}

bool Scheduler::listen_for_others(bool urgent_step, bool may_stop, Listening& own) {
  if (own.yielded) return true;
  if (may_stop && !own.stoppable) {  // this step's pass can make way
    std::lock_guard lock(mutex_);
    ++stoppable_steps_;
    own.stoppable = true;
  }
  const auto now = std::chrono::steady_clock::now();
  bool heard_end = false;
  if (now - own.last >= kListenEvery) {
    own.last = now;
    std::vector<std::shared_ptr<StreamSession>> waiting;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      waiting.assign(ready_.begin(), ready_.end());
    }
    for (const std::shared_ptr<StreamSession>& session : waiting) heard_end = session->listen_waiting() || heard_end;
  }
  if (heard_end) {
    std::lock_guard lock(mutex_);
    promote_urgent_locked();
    wake_.notify_one();
  }
  // Between nodes this is all most calls do: nothing waits that a pass would make way for.
  if (urgent_step || !may_stop || !way_asked_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(mutex_);
  // Way is made for a flush's model work only (not a step that runs the VAD alone).
  const bool lending = pass_threads_.max_threads > pass_threads_.threads;
  if (lending && making_way_ > 0) return yield_locked(own);  // a flush waits for every core
  if (std::none_of(urgent_.begin(), urgent_.end(), [](const auto& session) { return session->flush_due(); }))
    return false;
  // Lending cores: every pass makes way and the flush takes all of them. Else a
  // free worker takes it, or this one.
  if (!lending) {
    const bool free_worker = running_ < workers() && free_threads_ >= pass_threads_.threads;
    if (free_worker || urgent_.size() <= static_cast<size_t>(yielding_)) return false;
  }
  return yield_locked(own);
}

bool Scheduler::yield_locked(Listening& own) {
  ++yielding_;
  own.yielded = true;
  return true;
}

void Scheduler::run() {
  const int per_pass = pass_threads_.threads;
  std::unique_lock lock(mutex_);
  for (;;) {
    // A worker starts a step only with its share of the cores free (a lent pass
    // gives them back when it ends); an urgent one once the passes making way for
    // it have stopped (their cores).
    wake_.wait(lock, [&] {
      return stopping_ || ((!urgent_.empty() || !ready_.empty()) && free_threads_ >= per_pass && making_way_ == 0 &&
                           (urgent_.empty() || yielding_ == 0));
    });
    if (stopping_) return;
    const bool urgent_step = !urgent_.empty();
    std::deque<std::shared_ptr<StreamSession>>& queue = urgent_step ? urgent_ : ready_;
    std::shared_ptr<StreamSession> session = std::move(queue.front());
    queue.pop_front();
    note_way_locked();
    // A flush's model work with cores to lend: the other steps' passes stop at
    // their next node (listen_for_others) and their cores come to it. A step in
    // a part that cannot stop keeps its core: the wait for it is short.
    const bool flush = urgent_step && pass_threads_.max_threads > per_pass && session->flush_due();
    if (flush && stoppable_steps_ > 0) {
      ++making_way_;
      note_way_locked();
      wake_.wait_for(lock, kMakeWay, [&] { return stopping_ || (stoppable_steps_ == 0 && yielding_ == 0); });
      --making_way_;
      note_way_locked();
      wake_.notify_all();
    }
    ++running_;
    // Nothing waiting behind it, or a flush: the free cores go to this pass.
    int threads = per_pass;
    if ((urgent_.empty() && ready_.empty()) || flush) threads = std::min(free_threads_, pass_threads_.max_threads);
    free_threads_ -= threads;
    const bool lent = threads > per_pass;
    if (lent) ++lent_steps_;
    lock.unlock();
    Listening own{std::chrono::steady_clock::now()};
    {
      PassThreads scope(threads);  // 0 (no policy): each backend keeps its own
      PassListener listen(
          [&, may_stop = session->stops_passes()] { return listen_for_others(urgent_step, may_stop, own); });
      session->step();
    }
    lock.lock();
    --running_;
    free_threads_ += threads;
    if (own.stoppable) --stoppable_steps_;
    if (own.yielded) --yielding_;
    if (own.stoppable || own.yielded) wake_.notify_all();  // a flush making way may go on
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

// Runs model work for every live session on a fixed set of worker threads.
// Fair: sessions with work wait in a FIFO and each turn is one step (at most
// max_step_seconds of audio), so a long stream cannot starve the others; a
// session that fell behind gets bigger steps, not a longer queue. Sessions whose
// next step may end a turn (StreamSession::urgent: an end of speech the VAD has
// pending, a finalize) wait in a FIFO of their own that the workers serve first:
// a voice agent waits for that step, and it is short (the VAD alone) or the one
// flush of a turn. A session is never stepped on two threads at once.
//
// Threads per pass (PassThreadPolicy): each step may run its model pass on a set
// number of threads, and a step that leaves nothing waiting may borrow the cores
// of the idle workers: a lone stream's pass (the flush at the end of a turn) then
// takes all of them instead of one worker's share. The workers' cores are never
// oversubscribed: a worker waits for lent cores to come back before it starts a
// step (at most the one pass that borrowed them).
//
// Ends are heard while they wait (common/pass_stop.h): between the nodes of a
// stoppable pass, the worker lets the VAD of each waiting session hear the audio
// that arrived (StreamSession::listen_waiting, every few ms), so a speaker who
// stops while their session waits behind others makes it urgent at once. An
// urgent step that does a flush's model work (StreamSession::flush_due) does not
// wait behind other streams' passes: with cores to lend, every pass that can
// stop does (its audio waits for its next step) and the flush runs on all the
// cores; without, one worker stops its pass and takes the flush.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "session/stream_session.h"

namespace earshot::session {

// How many threads a step's model pass gets (common/pass_threads.h).
struct PassThreadPolicy {
  int threads = 0;      // per pass; 0: not decided per pass (each backend keeps its own)
  int max_threads = 0;  // a step with none waiting behind it may take up to this many
                        // of the workers' cores (workers x threads); <= threads: never
};

class Scheduler {
 public:
  explicit Scheduler(int workers, PassThreadPolicy threads = {});
  ~Scheduler();  // stop()
  // Finishes the step in progress on each worker, joins the workers and drops the
  // queued sessions; later notify() calls queue nothing. Idempotent. A server calls
  // it before tearing down what the sessions' listeners reach (its I/O context):
  // a worker's last step may otherwise release a connection's last reference
  // after that is gone.
  void stop();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Call after pushing audio or ending a stream: queues the session if it has
  // work and is not already queued or running.
  void notify(const std::shared_ptr<StreamSession>& session);

  // Blocks until `session` is done() or `deadline` passes (false then), without
  // polling: woken after every step and by wake_waiters().
  bool wait_done(const StreamSession& session, std::chrono::steady_clock::time_point deadline);
  // Wakes wait_done() and wait_busy() callers (after a session failed outside
  // the workers, or when what a wait_busy() condition reads besides busy() changed).
  void wake_waiters();

  int workers() const { return static_cast<int>(threads_.size()); }
  const PassThreadPolicy& pass_threads() const { return pass_threads_; }
  // Steps that ran on more threads than PassThreadPolicy::threads (borrowed cores).
  int64_t lent_steps() const;
  size_t queued() const;
  // Sessions queued or being stepped (0: idle).
  size_t busy() const;
  // Blocks until `condition(busy())` holds or `deadline` passes (false then),
  // without polling: re-checked after every step and on wake_waiters(). A test
  // that runs sessions on a virtual clock waits with it until every worker is
  // idle or blocked on that clock (wait_idle: until nothing is busy).
  bool wait_busy(const std::function<bool(size_t busy)>& condition, std::chrono::steady_clock::time_point deadline);
  bool wait_idle(std::chrono::steady_clock::time_point deadline) {
    return wait_busy([](size_t busy) { return busy == 0; }, deadline);
  }

 private:
  void run();
  // A worker's listener between the nodes of its step's pass: hears the waiting
  // sessions, true when this worker should yield to an urgent one (once: then
  // it stays true).
  struct Listening {
    std::chrono::steady_clock::time_point last;  // the waiting sessions were last heard
    bool stoppable = false;                      // the step's pass has asked (counted in stoppable_steps_)
    bool yielded = false;                        // it said stop (counted in yielding_)
  };
  // may_stop: the step's session lets its passes stop (StreamOptions::stop_passes).
  bool listen_for_others(bool urgent_step, bool may_stop, Listening& own);
  bool yield_locked(Listening& own);
  // Moves the sessions of ready_ that became urgent to urgent_; mutex_ held.
  void promote_urgent_locked();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable stepped_;  // after each step, for wait_done()
  // Queues a session (scheduled_ already holds it) by its urgency; mutex_ held.
  void enqueue_locked(std::shared_ptr<StreamSession> session);
  // Publishes way_asked_ after urgent_ or making_way_ changed; mutex_ held.
  void note_way_locked();

  std::deque<std::shared_ptr<StreamSession>> urgent_;  // served first
  std::deque<std::shared_ptr<StreamSession>> ready_;
  std::set<const StreamSession*> scheduled_;  // queued or running
  bool stopping_ = false;
  PassThreadPolicy pass_threads_;
  int free_threads_ = 0;     // of the workers' cores, those no step holds
  int running_ = 0;          // steps in progress
  int yielding_ = 0;         // workers stopping their pass for an urgent session, not yet back
  int making_way_ = 0;       // flushes waiting for the other steps' cores
  int stoppable_steps_ = 0;  // steps in progress whose pass has listened (it can make way)
  // An urgent session is queued or a flush waits for cores: what a pass between
  // its nodes reads before it takes mutex_ (listen_for_others). A stale false
  // costs one node.
  std::atomic<bool> way_asked_{false};
  int64_t lent_steps_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace earshot::session

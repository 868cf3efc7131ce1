// Continuous batching without a timer, for any executor that runs a batch of
// items at once (the Whisper decoder steps of several sessions, the chunks of
// several streaming transducer streams). A caller's submit() queues its item and
// blocks; whichever caller finds the executor idle runs everything queued (up to
// max_batch, oldest first) and hands each item back. A lone item runs at once;
// items arriving while a batch computes form the next one. The run callable must
// not throw: it records each item's own error in the item.
//
// That rule alone lets two callers that submit one item after another alternate
// (one's item runs while the other prepares its next, which then runs alone).
// A caller about to submit a run of items joins (Participation) for that run:
// while callers are joined, a batch waits until each of them has an item queued
// (or max_batch are), so callers stepping together share every batch. A caller
// that is not joined is not waited for.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::runtime {

template <typename Item>
class Rendezvous {
 public:
  explicit Rendezvous(int max_batch) : max_batch_(max_batch) {
    if (max_batch < 1) {
      throw Error(ErrorCode::kInvalidArgument, "batch size must be >= 1, got " + std::to_string(max_batch));
    }
  }
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Items submitted, batches run, and the largest batch so far.
  struct Counts {
    int64_t items = 0;
    int64_t batches = 0;
    int64_t max_batch = 0;
  };
  Counts counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }
  int max_batch() const { return max_batch_; }

  // Joined for its lifetime (see above): the caller's submits in between are
  // waited for by the batches. One per caller at a time.
  class Participation {
   public:
    explicit Participation(Rendezvous& r) : r_(r) {
      std::lock_guard lock(r_.mutex_);
      ++r_.joined_;
    }
    ~Participation() {
      std::lock_guard lock(r_.mutex_);
      --r_.joined_;
      r_.done_.notify_all();  // a batch waiting for this caller goes without it
    }
    Participation(const Participation&) = delete;
    Participation& operator=(const Participation&) = delete;

   private:
    Rendezvous& r_;
  };

  // Blocks until `item` ran in a batch (run by this caller or another) and returns it.
  template <typename Run>
  Item submit(Item item, Run&& run) {
    Pending me{std::move(item), false};
    std::unique_lock lock(mutex_);
    queue_.push_back(&me);
    if (joined_ > 0) done_.notify_all();  // a batch may have waited for this item
    while (!me.done) {
      if (running_ || queue_.size() < std::min<size_t>(static_cast<size_t>(joined_), max_batch_)) {
        done_.wait(lock);
        continue;
      }
      // The executor is idle: this caller runs the oldest pending items (its own
      // among them unless more than max_batch wait, then it stays to run the next batch).
      running_ = true;
      const size_t n = std::min(queue_.size(), static_cast<size_t>(max_batch_));
      std::vector<Pending*> batch(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      lock.unlock();
      std::vector<Item> items;
      items.reserve(n);
      for (Pending* p : batch) items.push_back(std::move(p->item));
      run(std::span<Item>(items));  // never throws
      lock.lock();
      for (size_t i = 0; i < n; ++i) {
        batch[i]->item = std::move(items[i]);
        batch[i]->done = true;
      }
      counts_.items += static_cast<int64_t>(n);
      counts_.batches += 1;
      counts_.max_batch = std::max(counts_.max_batch, static_cast<int64_t>(n));
      running_ = false;
      done_.notify_all();
    }
    return std::move(me.item);
  }

 private:
  struct Pending {
    Item item;
    bool done;
  };
  const int max_batch_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::deque<Pending*> queue_;
  bool running_ = false;
  int joined_ = 0;  // callers in a Participation
  Counts counts_;
};

}  // namespace earshot::runtime

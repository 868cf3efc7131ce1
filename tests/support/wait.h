// Waiting in tests on what the code under test does, never on the wall clock:
// a condition polled until it holds, a gate a test opens, a counter a test
// waits on. Every wait has a generous limit that only guards against a hang
// (the test then fails with its own message); no test asserts how long
// anything took.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace earshot::testing {

// The hang guard of every wait below.
inline constexpr std::chrono::seconds kHangGuard{30};

// True once ready() holds (polled every few ms); false if it still does not
// after `limit`. Use as ASSERT_TRUE(eventually(...)) << "what never happened".
template <typename Ready>
[[nodiscard]] bool eventually(Ready&& ready, std::chrono::milliseconds limit = kHangGuard) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Closed until open(); wait() blocks the calling thread (a fake model's pass,
// say) until then. A Gate in a test body opens itself on leaving it, so a
// failed assertion never leaves a thread blocked.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() { open(); }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  // False if still closed after `limit`.
  bool wait(std::chrono::milliseconds limit = kHangGuard) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

// A count some thread raises and a test waits on.
class Counter {
 public:
  int add() {
    int now;
    {
      std::lock_guard lock(mutex_);
      now = ++value_;
    }
    changed_.notify_all();
    return now;
  }
  int value() {
    std::lock_guard lock(mutex_);
    return value_;
  }
  // False if the count is still below `n` after `limit`.
  [[nodiscard]] bool wait_for_at_least(int n, std::chrono::milliseconds limit = kHangGuard) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return value_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int value_ = 0;
};

}  // namespace earshot::testing

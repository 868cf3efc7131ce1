// How many CPU threads the model pass running on this thread may use, when the
// caller that runs it (the session scheduler) decides per pass rather than per
// model load: a lone stream's pass gets the cores the idle workers would leave
// unused. 0 (the default, and outside a scheduler): each backend keeps the thread
// count it was created with. Thread-local: a pass runs on one thread.
//
//   { PassThreads lend(4); session->step(); }  // graphs computed in step() use 4
#pragma once

namespace earshot {

namespace detail {
inline thread_local int pass_threads = 0;
}

// The threads the current pass may use; 0: not decided per pass.
inline int pass_threads() { return detail::pass_threads; }

// Sets pass_threads() for its lifetime (0: not decided per pass), then restores what was there.
class PassThreads {
 public:
  explicit PassThreads(int n) : previous_(detail::pass_threads) { detail::pass_threads = n; }
  ~PassThreads() { detail::pass_threads = previous_; }
  PassThreads(const PassThreads&) = delete;
  PassThreads& operator=(const PassThreads&) = delete;

 private:
  int previous_;
};

}  // namespace earshot

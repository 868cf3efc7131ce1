// Stopping a model pass in flight. A session's step runs a pass that may take
// longer than the audio it covers (AlignAtt: the encoder over Whisper's 30 s
// window); when the speaker stops meanwhile, the pass only delays the flush
// that ends the turn. Two parties agree on stopping it:
// - the caller (the session) installs a listener for the pass on its thread:
//   it hears the audio that arrived since (the VAD) and says whether to stop;
// - the processor marks where its pass can be dropped whole (StoppablePass):
//   nothing it changed there is kept, so the same pass can run again later.
// Between the nodes of every graph computed inside both, the graph runner calls
// the listener (on the CPU, ggml's abort callback; elsewhere after each graph);
// `true` ends the computation and PassStopped is thrown to the caller.
//
//   { PassListener hear([&] { return vad_says_end(); });
//     try { processor->process(); } catch (const PassStopped&) { /* run it later */ } }
//   // in the processor:
//   { StoppablePass stoppable; encode(); }  // state changes only after this
//
// Thread-local, as common/pass_threads.h: a pass runs on one thread.
#pragma once

#include <exception>
#include <functional>
#include <utility>

namespace earshot {

// Thrown out of a pass whose listener asked it to stop. Not an error: the pass
// left nothing behind, and its caller runs it (or a flush) later.
class PassStopped : public std::exception {
 public:
  const char* what() const noexcept override { return "the model pass was stopped by its caller"; }
};

namespace detail {
inline thread_local const std::function<bool()>* pass_listener = nullptr;
inline thread_local int stoppable_depth = 0;
}  // namespace detail

// The listener to call between a graph's nodes, or null where the pass on this
// thread may not be stopped (no listener, or outside every StoppablePass).
inline const std::function<bool()>* pass_stop_listener() {
  return detail::stoppable_depth > 0 ? detail::pass_listener : nullptr;
}

// Asks `listener` whether to stop. The graphs it computes itself (the VAD's)
// are not stoppable: it runs outside every StoppablePass.
inline bool pass_listener_says_stop(const std::function<bool()>& listener) {
  struct Restore {
    int depth;
    ~Restore() { detail::stoppable_depth = depth; }
  } restore{std::exchange(detail::stoppable_depth, 0)};
  return listener();
}

// The caller's side: adds `listener` for its lifetime (restoring what was there).
// Listeners nest: the scheduler's around a step, the session's around its pass;
// the innermost is asked first and the pass stops when any says so. Null adds
// nothing.
class PassListener {
 public:
  explicit PassListener(std::function<bool()> listener) : previous_(detail::pass_listener) {
    if (!listener) return;
    if (const std::function<bool()>* outer = previous_)
      listener_ = [inner = std::move(listener), outer] { return inner() || (*outer)(); };
    else
      listener_ = std::move(listener);
    detail::pass_listener = &listener_;
  }
  ~PassListener() { detail::pass_listener = previous_; }
  PassListener(const PassListener&) = delete;
  PassListener& operator=(const PassListener&) = delete;

 private:
  std::function<bool()> listener_;
  const std::function<bool()>* previous_;
};

// The processor's side: graphs computed in its lifetime may be stopped.
class StoppablePass {
 public:
  StoppablePass() { ++detail::stoppable_depth; }
  ~StoppablePass() { --detail::stoppable_depth; }
  StoppablePass(const StoppablePass&) = delete;
  StoppablePass& operator=(const StoppablePass&) = delete;
};

}  // namespace earshot

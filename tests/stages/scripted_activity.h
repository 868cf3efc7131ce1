// The diarization model's test double: who speaks when is a script of turns on
// the source's clock; frames of 80 ms come out a chunk of audio at a time (as
// the streaming Sortformer's 1 s chunks), the rest at finish(). Not a model:
// the tests of the stage, its registry entry and the protocols' speakers run
// on it until the real one is wired in.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "stages/diarization/activity.h"

namespace earshot::testing {

struct Turn {
  double start = 0, end = 0;
  int speaker = 0;  // 0-based, in order of arrival
};

class ScriptedActivity : public stages::diarization::ActivitySource {
 public:
  static constexpr double kFrame = 0.08;
  explicit ScriptedActivity(std::vector<Turn> turns, double chunk_seconds = 1.0, std::function<void()> on_push = {})
      : turns_(std::move(turns)), chunk_(chunk_seconds), on_push_(std::move(on_push)) {}

  void push(std::span<const float> samples) override {
    if (on_push_) on_push_();
    pushed_ += static_cast<double>(samples.size()) / 16000.0;
    while (pushed_ + 1e-9 >= emitted_ + chunk_) emit_until(emitted_ + chunk_);
  }
  void finish() override { emit_until(pushed_); }
  std::vector<stages::diarization::ActivityFrame> take_frames() override {
    std::vector<stages::diarization::ActivityFrame> out;
    out.swap(ready_);
    return out;
  }
  double pushed_seconds() const { return pushed_; }

 private:
  void emit_until(double until) {
    for (double t = emitted_; t + 1e-9 < until; t += kFrame) {
      stages::diarization::ActivityFrame f;
      f.start = t;
      f.end = std::min(t + kFrame, until);
      const double middle = (f.start + f.end) / 2;
      for (float& p : f.prob) p = 0.05f;
      for (const Turn& turn : turns_)
        if (middle >= turn.start && middle < turn.end) f.prob[turn.speaker] = 0.9f;
      ready_.push_back(f);
    }
    emitted_ = until;
  }

  std::vector<Turn> turns_;
  double chunk_;
  std::function<void()> on_push_;
  double pushed_ = 0;
  double emitted_ = 0;
  std::vector<stages::diarization::ActivityFrame> ready_;
};

}  // namespace earshot::testing

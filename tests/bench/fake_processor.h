// Test doubles for the bench: a manual clock and an OnlineProcessor whose
// commits, provisional words and computation time are scripted per call.
#pragma once

#include <algorithm>
#include <map>
#include <vector>

#include "bench/runner.h"
#include "common/error.h"

namespace earshot::bench::testing {

class ManualClock : public Clock {
 public:
  double now() override { return now_; }
  void sleep_until(double t) override { now_ = std::max(now_, t); }
  void advance(double dt) { now_ += dt; }

 private:
  double now_ = 100.0;  // any origin: streams measure from their own start
};

inline Word word(const char* text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  return w;
}

struct ScriptStep {
  std::vector<Word> commit;
  std::vector<Word> provisional;
};

// Call k of process() (finish() is the call after the last process()) returns
// script[k]; each call takes `compute_seconds` on the clock.
class ScriptedProcessor : public OnlineProcessor {
 public:
  ScriptedProcessor(ManualClock& clock, std::map<int, ScriptStep> script, double compute_seconds)
      : clock_(clock), script_(std::move(script)), compute_(compute_seconds) {}

  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    inserted.push_back(samples.size());
    end_times.push_back(stream_end_time);
  }
  ProcessResult process(bool) override { return step(); }
  std::vector<Word> provisional() const override { return provisional_; }
  std::vector<Word> hypothesis() const override {
    std::vector<Word> h = committed_;
    h.insert(h.end(), provisional_.begin(), provisional_.end());
    return h;
  }
  ProcessResult start_silence() override { return {}; }
  void end_silence(double, double) override {}
  ProcessResult finish() override {
    finished = true;
    return step();
  }
  void warmup() override { warmed_up = true; }
  std::string language() const override { return "en"; }

  std::vector<size_t> inserted;
  std::vector<double> end_times;
  bool finished = false;
  bool warmed_up = false;
  int fail_at_call = -1;

 private:
  ProcessResult step() {
    const int k = calls_++;
    if (k == fail_at_call) throw Error(ErrorCode::kInternal, "scripted failure");
    clock_.advance(compute_);
    ProcessResult r;
    auto it = script_.find(k);
    if (it != script_.end()) {
      r.committed = it->second.commit;
      provisional_ = it->second.provisional;
    } else {
      provisional_.clear();
    }
    committed_.insert(committed_.end(), r.committed.begin(), r.committed.end());
    return r;
  }

  ManualClock& clock_;
  std::map<int, ScriptStep> script_;
  double compute_;
  int calls_ = 0;
  std::vector<Word> committed_, provisional_;
};

}  // namespace earshot::bench::testing

// The translation capacity run's clock in tests, stepped: sleep_until(t) reads t
// at once. Settled (given the service), it first waits until the service has no
// job left, so every event of what was fed arrives at the time it was fed (a
// model infinitely fast).
#pragma once

#include <algorithm>
#include <atomic>

#include "bench/runner.h"
#include "stages/translation/translation_stage.h"

namespace earshot::testing {

class SteppedClock : public bench::Clock {
 public:
  explicit SteppedClock(const stages::translation::TranslationService* settle = nullptr) : settle_(settle) {}
  double now() override { return now_.load(); }
  void sleep_until(double t) override {
    if (settle_) settle_->wait_idle();
    now_ = std::max(now_.load(), t);
  }

 private:
  const stages::translation::TranslationService* settle_;
  std::atomic<double> now_{0};
};

}  // namespace earshot::testing

// Capacity runs (src/bench/capacity.h) with a processor that takes a set share
// of real time per audio second: within capacity the lag stays near a chunk;
// overloaded it grows past the limit; the profile splits what was timed.
#include "bench/capacity.h"

#include <gtest/gtest.h>

#include <thread>

namespace earshot::bench {
namespace {

// Spends `load` seconds of wall time per second of audio processed (as a model
// would), committing one word per call.
class LoadProcessor : public OnlineProcessor {
 public:
  explicit LoadProcessor(double load) : load_(load) {}
  void insert_audio(std::span<const float> samples, double end) override {
    pending_ += static_cast<double>(samples.size()) / 16000.0;
    end_ = end;
  }
  ProcessResult process(bool) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(pending_ * load_));
    pending_ = 0;
    ProcessResult r;
    r.processed_until = end_;
    Word w;
    w.text = " w";
    w.start = w.end = end_;
    r.committed.push_back(w);
    return r;
  }
  std::vector<Word> provisional() const override { return {}; }
  std::vector<Word> hypothesis() const override { return {}; }
  ProcessResult start_silence() override { return process(true); }
  void end_silence(double, double) override {}
  void new_speaker(int) override {}
  ProcessResult finish() override { return process(true); }
  void warmup() override {}
  std::string language() const override { return "en"; }

 private:
  double load_;
  double pending_ = 0, end_ = 0;
};

CapacityRun run(int sessions, double load, bool profile) {
  std::vector<std::vector<float>> audio(sessions, std::vector<float>(16000 * 3 / 2, 0.0f));
  CapacityOptions options;
  options.workers = 1;
  options.chunk_seconds = 0.25;
  return run_capacity(
      [&](int) {
        CapacityStream s;
        s.processor = std::make_unique<LoadProcessor>(load);
        if (profile) {
          s.counters = std::make_shared<ProfileCounters>();
          s.processor = time_processor(std::move(s.processor), s.counters);
        }
        return s;
      },
      audio, options);
}

TEST(Capacity, SessionsWithinCapacityKeepTheLagNearAChunkAndShareFairly) {
  const CapacityRun r = run(2, 0.1, /*profile=*/true);
  ASSERT_EQ(r.per_session.size(), 2u);
  EXPECT_TRUE(r.within(1.0)) << r.max_p95_lag();
  EXPECT_LT(r.max_p95_lag(), 0.6);
  EXPECT_EQ(r.skipped_seconds(), 0.0);
  EXPECT_LT(r.fairness(), 1.5);
  EXPECT_DOUBLE_EQ(r.audio_seconds, 3.0);
  for (const SessionFigures& f : r.per_session) {
    EXPECT_TRUE(f.error.empty()) << f.error;
    EXPECT_GT(f.processed_at_feed_end, 0.5);
  }
  ASSERT_TRUE(r.profile.has_value());
  // Two sessions x 1.5 s x 0.1: the sleeping processor's time is all "policy" (no model passes here).
  EXPECT_GT(r.profile->policy, 0.25);
  EXPECT_LT(r.profile->policy, 1.0);
  EXPECT_EQ(r.profile->encoder_passes, 0);
  EXPECT_GT(r.profile->protocol, 0.0);  // updates were rendered
}

TEST(Capacity, OverloadedSessionsFallBehindPastTheLimit) {
  // Three sessions each needing 0.9 s per audio second on one worker: 2.7x real time.
  const CapacityRun r = run(3, 0.9, /*profile=*/false);
  EXPECT_FALSE(r.within(1.0));
  EXPECT_GT(r.max_p95_lag(), 1.0);
  EXPECT_FALSE(r.profile.has_value());
  for (const SessionFigures& f : r.per_session) EXPECT_TRUE(f.error.empty()) << f.error;
}

}  // namespace
}  // namespace earshot::bench

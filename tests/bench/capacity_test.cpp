// Capacity runs (src/bench/capacity.h) with a processor that takes a set share
// of real time per audio second: within capacity the lag stays near a chunk;
// overloaded it grows past the limit; the profile splits what was timed.
#include "bench/capacity.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/capacity_report.h"

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

TEST(CapacityReport, ProfileSummaryDividesByAudioAndPasses) {
  StageTimes t;
  t.mel = 0.1;
  t.vad = 0.2;
  t.encoder = 3.0;
  t.decoder = 1.0;
  t.policy = 0.5;
  t.protocol = 0.2;
  t.encoder_passes = 10;
  t.decoder_calls = 30;
  const ProfileSummary p = summarize_profile(t, 10.0);
  EXPECT_DOUBLE_EQ(p.ms_per_audio_second.encoder, 300);
  EXPECT_DOUBLE_EQ(p.ms_per_audio_second.vad, 20);
  EXPECT_DOUBLE_EQ(p.compute_rtf, 0.5);
  EXPECT_DOUBLE_EQ(p.passes_per_second, 1.0);
  EXPECT_DOUBLE_EQ(p.decoder_steps_per_pass, 3.0);
  EXPECT_DOUBLE_EQ(p.encoder_ms_per_pass, 310);  // the encoder's mel is part of its pass
  EXPECT_DOUBLE_EQ(p.decoder_ms_per_pass, 100);
  EXPECT_DOUBLE_EQ(p.encoder_share, 0.6);
  EXPECT_EQ(summarize_profile(StageTimes{}, 0).decoder_steps_per_pass, 0);  // no pass, no division by zero
}

TEST(CapacityReport, JsonAndMarkdownCarryEveryRunAndTheSearch) {
  CapacityReport report;
  report.dataset = "data \"x\"";
  report.chunk_seconds = 0.5;
  report.max_buffered_seconds = 60;
  auto session = [](double p95, double max_lag, double skipped, double processed, double drain, std::string error) {
    SessionFigures f;
    f.audio_seconds = 25;
    f.p95_lag = p95;
    f.max_lag = max_lag;
    f.skipped_seconds = skipped;
    f.processed_at_feed_end = processed;
    f.drain_seconds = drain;
    f.error = std::move(error);
    return f;
  };
  CapacityRun fast;
  fast.sessions = 1;
  fast.workers = 2;
  fast.per_session = {session(0.7, 0.9, 0, 24.5, 0, "")};
  fast.audio_seconds = 25;
  StageTimes times;
  times.encoder = 10;
  times.decoder = 2.5;
  times.encoder_passes = 50;
  times.decoder_calls = 150;
  fast.profile = times;
  CapacityRun slow;
  slow.sessions = 2;
  slow.workers = 2;
  slow.per_session = {session(3.0, 4.0, 2.0, 20, 5, ""), session(2.0, 2.5, 0, 10, 7, "model failed")};
  report.rows = {{"alignatt", 1, 0, fast}, {"alignatt", 1, 0, slow}};
  report.searches = {{"alignatt", 1, false}};

  std::ostringstream out;
  write_capacity_json(out, report);
  const nlohmann::json j = nlohmann::json::parse(out.str());  // throws on invalid JSON
  EXPECT_EQ(j["config"]["dataset"], "data \"x\"");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["within_lag_limit"], true);
  EXPECT_DOUBLE_EQ(j["runs"][0]["profile"]["compute_rtf"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["runs"][0]["profile"]["passes_per_second"].get<double>(), 2.0);
  const nlohmann::json& s = j["runs"][1];
  EXPECT_EQ(s["within_lag_limit"], false);
  EXPECT_DOUBLE_EQ(s["p95_lag_max"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(s["max_lag"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["skipped_seconds"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["fairness"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["drain_seconds_max"].get<double>(), 7.0);
  EXPECT_TRUE(s["profile"].is_null());
  ASSERT_EQ(s["per_session"].size(), 2u);
  EXPECT_EQ(s["per_session"][1]["error"], "model failed");
  ASSERT_EQ(j["capacity"].size(), 1u);
  EXPECT_EQ(j["capacity"][0]["sessions"], 1);
  EXPECT_EQ(j["capacity"][0]["reached_max_sessions"], false);

  std::ostringstream md;
  write_capacity_markdown(md, report);
  const std::string text = md.str();
  EXPECT_NE(text.find("| alignatt | 1 | 2 x 1 | 0 | 0.70 | 0.90 | 0.0 | 1.00 | 0 | 0.0 | yes | 0.500 | 2.00 | 3.0 | "
                      "200.0 | 80% |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| alignatt | 2 | 2 x 1 | 0 | 3.00 | 4.00 | 2.0 | 2.00 | 0 | 7.0 | no | - |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("- **alignatt**: capacity 1 real-time session(s)\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace earshot::bench

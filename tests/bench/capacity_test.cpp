// Capacity runs (src/bench/capacity.h) on a virtual clock: the fake processor
// (and VAD) take a set share of model time per audio second by waiting on the
// clock, and the clock moves only when every worker is idle or waiting on it,
// so every lag, fairness and profile figure below is exact, derived by hand
// from the schedule (no sleeps, no wall-clock bounds). Within capacity the lag
// stays at a chunk; overloaded it grows past the limit; beyond the buffered
// audio it skips; sessions take turns; the profile splits what was timed.
// A diarized run (the stage on a scripted source, its pool settled with the
// workers) has the stage's figures, and the pass rule weighs them.
#include "bench/capacity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "../stages/scripted_activity.h"
#include "../support/wait.h"
#include "bench/capacity_report.h"
#include "session/scheduler.h"
#include "stages/diarization/diarization_stage.h"

namespace earshot::bench {
namespace {

// Virtual time for run_capacity: the feeder's sleep_until(t) runs the model
// time the workers asked for (spend()) in order of when it ends, each end
// followed by whatever the worker does next, and returns once every worker is
// idle or waiting again, the clock at t. Work that ends exactly at a tick ends
// before the tick's feed. Nothing else moves the clock. With a stage's pool,
// its jobs (which take no virtual time) finish before the clock moves too.
class VirtualTime : public Clock {
 public:
  explicit VirtualTime(session::Scheduler& scheduler, const stages::WorkerPool* pool = nullptr)
      : scheduler_(scheduler), pool_(pool) {}

  double now() override { return now_.load(); }

  void sleep_until(double t) override {
    for (;;) {
      settle();
      if (pool_) pool_->wait_idle();
      std::lock_guard lock(mutex_);
      double first = std::numeric_limits<double>::infinity();
      for (const auto& [ticket, wake] : waiting_) first = std::min(first, wake);
      if (first > t + kTie) break;
      now_ = std::max(now_.load(), first);
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->second <= first + kTie) {
          released_.insert(it->first);
          --waiting_count_;
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      released_changed_.notify_all();
    }
    now_ = std::max(now_.load(), t);
  }

  // A worker's model time: returns when the feeder's clock has moved `seconds`
  // past now (at once never: even 0 s waits for the feeder's next tick).
  void spend(double seconds) {
    std::unique_lock lock(mutex_);
    const uint64_t ticket = next_ticket_++;
    waiting_[ticket] = now_.load() + seconds;
    ++waiting_count_;
    lock.unlock();
    scheduler_.wake_waiters();  // the feeder's settle() counts this worker as waiting now
    lock.lock();
    const bool released =
        released_changed_.wait_for(lock, earshot::testing::kHangGuard, [&] { return released_.count(ticket) > 0; });
    EXPECT_TRUE(released) << "model time never ran out (the feeder stopped?)";
    released_.erase(ticket);
  }

 private:
  static constexpr double kTie = 1e-9;  // sums of chunk costs carry rounding of ~1e-16

  // Until every busy session's worker waits in spend() (one worker).
  void settle() {
    const bool settled = scheduler_.wait_busy(
        [this](size_t busy) {
          const size_t waiting = waiting_count_.load();
          return busy == waiting || waiting >= static_cast<size_t>(scheduler_.workers());
        },
        std::chrono::steady_clock::now() + earshot::testing::kHangGuard);
    EXPECT_TRUE(settled) << "a worker neither finished nor waited on the clock";
  }

  session::Scheduler& scheduler_;
  const stages::WorkerPool* pool_;
  std::atomic<double> now_{0};
  std::atomic<size_t> waiting_count_{0};
  std::mutex mutex_;
  std::condition_variable released_changed_;
  std::map<uint64_t, double> waiting_;  // ticket -> when its model time ends
  std::set<uint64_t> released_;
  uint64_t next_ticket_ = 0;
};

// Takes `load` seconds of model time per second of audio it processes,
// committing one word per call.
class LoadProcessor : public OnlineProcessor {
 public:
  LoadProcessor(double load, VirtualTime& time) : load_(load), time_(time) {}
  void insert_audio(std::span<const float> samples, double end) override {
    pending_ += static_cast<double>(samples.size()) / 16000.0;
    end_ = end;
  }
  ProcessResult process(bool) override {
    time_.spend(pending_ * load_);
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
  ProcessResult finish() override { return process(true); }
  void warmup() override {}
  std::string language() const override { return "en"; }

 private:
  double load_;
  VirtualTime& time_;
  double pending_ = 0, end_ = 0;
};

// Speech from the first sample on, deciding at once; `load` seconds of model
// time per audio second.
class LoadVad : public session::VoiceActivityDetector {
 public:
  LoadVad(double load, VirtualTime& time) : load_(load), time_(time) {}
  std::vector<session::VadEvent> push(std::span<const float> samples) override {
    time_.spend(static_cast<double>(samples.size()) / 16000.0 * load_);
    if (started_) return {};
    started_ = true;
    return {{session::VadEvent::Kind::kSpeechStart, 0}};
  }
  std::vector<session::VadEvent> finish() override { return {}; }
  int64_t max_event_delay_samples() const override { return 0; }

 private:
  double load_;
  VirtualTime& time_;
  bool started_ = false;
};

struct Setup {
  int sessions = 1;
  double seconds = 1.5;  // audio per session
  double load = 0.1;     // processor seconds per audio second
  double vad_load = -1;  // < 0: no VAD
  bool profile = false;
  double max_buffered_seconds = 60;
  double diarization_chunk = 0;  // > 0: a diarization stage on a scripted source of this chunk
};

// One worker, 0.25 s chunks: chunk m (1-based) of every session arrives at the
// first 0.1 s tick at or after 0.25 m s (0.3, 0.5, 0.8, 1.0, 1.3, 1.5...), the
// last with the end of the stream; lags are sampled at every tick, after the feed.
CapacityRun run(const Setup& setup) {
  std::vector<std::vector<float>> audio(setup.sessions,
                                        std::vector<float>(static_cast<size_t>(16000 * setup.seconds), 0.0f));
  std::shared_ptr<stages::WorkerPool> pool;  // the loaded diarization's, shared by the sessions
  if (setup.diarization_chunk > 0) pool = std::make_shared<stages::WorkerPool>(1);
  session::Scheduler scheduler(1);
  VirtualTime time(scheduler, pool.get());
  CapacityOptions options;
  options.workers = 1;
  options.chunk_seconds = 0.25;
  options.scheduler = &scheduler;
  options.stream.max_pending_seconds = setup.max_buffered_seconds;
  if (setup.vad_load >= 0)
    options.vad = [&](std::shared_ptr<ProfileCounters> counters) {
      session::VadFactory f = [&] { return std::make_unique<LoadVad>(setup.vad_load, time); };
      return counters ? time_vad(std::move(f), std::move(counters), &time) : f;
    };
  CapacityRun r = run_capacity(
      [&](int) {
        CapacityStream s;
        s.processor = std::make_unique<LoadProcessor>(setup.load, time);
        if (setup.profile) {
          s.counters = std::make_shared<ProfileCounters>();
          s.processor = time_processor(std::move(s.processor), s.counters, &time);
        }
        if (pool)
          s.stages.push_back(std::make_unique<stages::diarization::DiarizationStage>(
              std::make_unique<earshot::testing::ScriptedActivity>(std::vector<earshot::testing::Turn>{{0, 10, 0}},
                                                                   setup.diarization_chunk),
              stages::diarization::DiarizationOptions{}, pool, nullptr));
        return s;
      },
      audio, options, &time);
  EXPECT_TRUE(scheduler.wait_idle(std::chrono::steady_clock::now() + earshot::testing::kHangGuard));
  return r;
}

constexpr double kEps = 1e-9;

TEST(Capacity, SessionsWithinCapacityKeepTheLagAtAChunkAndShareFairly) {
  // Two sessions at 0.1 s per audio second: each chunk (0.025 s of work per
  // session) is done long before the next tick, so a session lags by the chunk
  // that just arrived at the 6 ticks a chunk arrives, 0 at the 9 others.
  const CapacityRun r = run({.sessions = 2, .load = 0.1, .profile = true});
  ASSERT_EQ(r.per_session.size(), 2u);
  EXPECT_DOUBLE_EQ(r.audio_seconds, 3.0);
  for (const SessionFigures& f : r.per_session) {
    EXPECT_TRUE(f.error.empty()) << f.error;
    EXPECT_DOUBLE_EQ(f.p95_lag, 0.25);  // 15 samples, 6 of them 0.25: ranks 13 and 14 of 0..14
    EXPECT_DOUBLE_EQ(f.max_lag, 0.25);
    EXPECT_DOUBLE_EQ(f.processed_at_feed_end, 1.25);  // the last chunk arrives with the feed's end
    EXPECT_NEAR(f.drain_seconds, 0.1, kEps);          // done by 1.55 s, seen at the 1.6 s tick
    EXPECT_EQ(f.skipped_seconds, 0.0);
  }
  EXPECT_DOUBLE_EQ(r.fairness(), 1.0);
  EXPECT_TRUE(r.within(1.0));
  EXPECT_FALSE(r.within(0.25));  // the limit is strict: p95 under it
  EXPECT_NEAR(r.elapsed_seconds, 1.6, kEps);
  ASSERT_TRUE(r.profile.has_value());
  // The processor's model time is all "policy" here (no model passes): 2 x 1.5 s x 0.1.
  EXPECT_NEAR(r.profile->policy, 0.3, kEps);
  EXPECT_EQ(r.profile->encoder_passes, 0);
  EXPECT_EQ(r.profile->protocol, 0.0);  // rendering the updates takes no virtual time
}

TEST(Capacity, AnOverloadedSessionFallsBehindPastTheLimit) {
  // One session needing 2 s per audio second. Steps (each takes what is waiting):
  //   0.3-0.8 chunk 1, 0.8-1.3 chunk 2, 1.3-2.3 chunks 3-4, 2.3-3.3 chunks 5-6 and the end.
  // Lags at ticks 0.1..3.2: 0 x2, 0.25 x2, 0.5 x5, 0.75 x5, 1.0 x8 (1.5..2.2), 0.5 x10.
  const CapacityRun r = run({.sessions = 1, .load = 2.0});
  ASSERT_EQ(r.per_session.size(), 1u);
  const SessionFigures& f = r.per_session[0];
  EXPECT_TRUE(f.error.empty()) << f.error;
  EXPECT_DOUBLE_EQ(f.p95_lag, 1.0);  // 32 samples: ranks 29 and 30 of 0..31 are 1.0
  EXPECT_DOUBLE_EQ(f.max_lag, 1.0);
  EXPECT_DOUBLE_EQ(f.processed_at_feed_end, 0.5);
  EXPECT_NEAR(f.drain_seconds, 1.8, kEps);  // the end arrived at 1.5 s, the last step ended at 3.3 s
  EXPECT_EQ(f.skipped_seconds, 0.0);
  EXPECT_FALSE(r.within(1.0));
  EXPECT_TRUE(r.within(1.5));
  EXPECT_FALSE(r.profile.has_value());
}

TEST(Capacity, AudioBeyondTheBufferedLimitIsSkipped) {
  // As above with at most 0.25 s waiting: chunk 3 is dropped when chunk 4
  // arrives at 1.0 s (step 2 runs until 1.3 s), chunk 5 when chunk 6 arrives at 1.5 s.
  const CapacityRun r = run({.sessions = 1, .load = 2.0, .max_buffered_seconds = 0.25});
  ASSERT_EQ(r.per_session.size(), 1u);
  EXPECT_TRUE(r.per_session[0].error.empty()) << r.per_session[0].error;
  EXPECT_DOUBLE_EQ(r.skipped_seconds(), 0.5);
  EXPECT_FALSE(r.within(100.0));  // skipped audio is never within capacity
}

TEST(Capacity, OverloadedSessionsTakeTurns) {
  // Two sessions at 1 s per audio second on one worker (2x real time), in
  // turns of one step each, a step taking all its session's waiting audio:
  // A 0.3-0.55 (chunk 1), B 0.55-1.05 (chunks 1-2), A 1.05-1.8 (2-4),
  // B 1.8-2.8 (3-6 and the end), A 2.8-3.3 (5-6 and the end).
  const CapacityRun r = run({.sessions = 2, .load = 1.0});
  ASSERT_EQ(r.per_session.size(), 2u);
  // When the feed ends (1.5 s) A has had one chunk, B two.
  EXPECT_DOUBLE_EQ(r.per_session[0].processed_at_feed_end, 0.25);
  EXPECT_DOUBLE_EQ(r.per_session[1].processed_at_feed_end, 0.5);
  EXPECT_DOUBLE_EQ(r.fairness(), 2.0);
  EXPECT_DOUBLE_EQ(r.per_session[0].max_lag, 1.25);        // 1.5 s received, 0.25 s processed (1.5-1.7 s)
  EXPECT_DOUBLE_EQ(r.per_session[1].max_lag, 1.0);         // 1.0 - 0 at 1.0 s; 1.5 - 0.5 at 1.5-1.7 s
  EXPECT_NEAR(r.per_session[0].drain_seconds, 1.8, kEps);  // the end arrived at 1.5 s
  EXPECT_NEAR(r.per_session[1].drain_seconds, 1.3, kEps);
  EXPECT_NEAR(r.elapsed_seconds, 3.3, kEps);
  for (const SessionFigures& f : r.per_session) EXPECT_TRUE(f.error.empty()) << f.error;
  EXPECT_FALSE(r.within(1.0));
}

TEST(Capacity, TheProfileSplitsVadAndPolicyTime) {
  // One session: the VAD takes 0.02 s and the processor 0.1 s per audio second.
  const CapacityRun r = run({.sessions = 1, .load = 0.1, .vad_load = 0.02, .profile = true});
  ASSERT_TRUE(r.profile.has_value());
  EXPECT_NEAR(r.profile->vad, 1.5 * 0.02, kEps);
  EXPECT_NEAR(r.profile->policy, 1.5 * 0.1, kEps);
  EXPECT_EQ(r.profile->mel, 0.0);
  EXPECT_EQ(r.profile->encoder, 0.0);
  EXPECT_EQ(r.profile->decoder, 0.0);
  EXPECT_EQ(r.profile->protocol, 0.0);
  EXPECT_NEAR(r.profile->total(), 0.18, kEps);
  EXPECT_DOUBLE_EQ(r.per_session[0].p95_lag, 0.25);
}

TEST(Capacity, ADiarizedRunHasTheStagesLagDropsAndSpeakerDelays) {
  // One session as in the first test, its chain a diarization stage whose
  // source gives frames 0.5 s at a time, in no virtual time. Ticks race the
  // worker's handing of a step's audio to the stage, so the lag is bounded,
  // not exact: at 0.4, 0.9 and 1.4 s a quarter second waits for the next half
  // second's frames; at most the source's chunk plus one feed chunk waits.
  const CapacityRun r = run({.sessions = 1, .load = 0.1, .diarization_chunk = 0.5});
  ASSERT_EQ(r.per_session.size(), 1u);
  const SessionFigures& f = r.per_session[0];
  EXPECT_TRUE(f.error.empty()) << f.error;
  EXPECT_DOUBLE_EQ(f.p95_lag, 0.25);  // the ASR's as without the stage
  ASSERT_TRUE(f.diarization.has_value());
  ASSERT_TRUE(r.diarized());
  const DiarizationFigures& d = *f.diarization;
  EXPECT_DOUBLE_EQ(d.received_seconds, 1.5);
  EXPECT_EQ(d.dropped_seconds, 0.0);
  EXPECT_GE(d.p95_lag, 0.25);
  EXPECT_LE(d.p95_lag, d.max_lag);
  EXPECT_LE(d.max_lag, 0.75 + kEps);
  EXPECT_GE(d.compute_seconds, 0.0);
  // Every committed word got its speaker before the stream ended, after its commit.
  EXPECT_GT(d.words, 0);
  ASSERT_EQ(d.speaker_delays.size(), static_cast<size_t>(d.words));
  for (double delay : d.speaker_delays) {
    EXPECT_GE(delay, 0.0);
    EXPECT_LE(delay, r.elapsed_seconds);
  }
  EXPECT_EQ(r.speaker_delay_words(), d.words);
  ASSERT_TRUE(r.speaker_delay(0.5).has_value());
  EXPECT_LE(*r.speaker_delay(0.5), *r.speaker_delay(0.95));
  EXPECT_DOUBLE_EQ(r.max_diarization_p95_lag(), d.p95_lag);
  // Within the ASR's limit; the diarization's decides.
  EXPECT_TRUE(r.within(1.0, 1.0));
  EXPECT_FALSE(r.within(1.0, 0.25));
}

// A run of one session with the ASR's p95 lag `asr` and, when `diarization_lag`
// >= 0, a diarization stage's p95 lag and dropped audio.
CapacityRun synthetic_run(double asr, double diarization_lag = -1, double dropped = 0) {
  CapacityRun r;
  r.sessions = 1;
  r.workers = 2;
  r.audio_seconds = 20;
  SessionFigures f;
  f.audio_seconds = 20;
  f.p95_lag = asr;
  f.max_lag = asr + 0.1;
  f.processed_at_feed_end = 19.5;
  if (diarization_lag >= 0) {
    DiarizationFigures d;
    d.p95_lag = diarization_lag;
    d.max_lag = diarization_lag + 0.5;
    d.received_seconds = 20;
    d.dropped_seconds = dropped;
    d.compute_seconds = 2;
    d.words = 4;
    d.speaker_delays = {1.0, 2.0, 3.0, 5.0};
    f.diarization = d;
  }
  r.per_session = {f};
  return r;
}

TEST(CapacityReport, ADiarizedRunIsWithinOnlyUnderBothLimitsWithNothingDropped) {
  CapacityReport report;
  report.lag_limit = 1.0;
  report.diarization_lag_limit = 4.5;  // any limit: the rule compares against it
  EXPECT_TRUE(report.within(synthetic_run(0.5, 4.0)));
  EXPECT_FALSE(report.within(synthetic_run(0.5, 4.5)));       // strict, as the ASR's
  EXPECT_FALSE(report.within(synthetic_run(0.5, 6.0)));       // only the diarization lag fails
  EXPECT_FALSE(report.within(synthetic_run(0.5, 1.0, 0.5)));  // only drops fail
  EXPECT_FALSE(report.within(synthetic_run(1.2, 1.0)));       // only the ASR's lag fails
  EXPECT_TRUE(report.within(synthetic_run(0.5)));             // a run without the stage: the ASR's rule
  EXPECT_EQ(report.pass_rule(),
            "every session's p95 lag under 1.00 s, nothing skipped, no error; its diarization p95 lag under 4.50 s "
            "and no diarization audio dropped");
  // The rule itself: drops fail even without a diarization limit.
  EXPECT_TRUE(synthetic_run(0.5, 6.0).within(1.0));
  EXPECT_FALSE(synthetic_run(0.5, 0.1, 0.5).within(1.0));
  const CapacityRun r = synthetic_run(0.5, 4.0);
  EXPECT_DOUBLE_EQ(*r.speaker_delay(0.5), 2.5);
  EXPECT_DOUBLE_EQ(*r.speaker_delay(0.95), 4.7);  // rank 2.85 of 0..3
  EXPECT_DOUBLE_EQ(r.diarization_compute_per_audio_second(), 0.1);
  EXPECT_FALSE(synthetic_run(0.5).speaker_delay(0.5).has_value());
}

TEST(CapacityReport, DiarizedReportsCarryTheStagesFiguresAndRule) {
  CapacityReport report;
  report.dataset = "talk";
  report.chunk_seconds = 0.5;
  report.lag_limit = 1.0;
  report.max_buffered_seconds = 60;
  report.diarization_lag_limit = 4.5;
  report.rows = {{"alignatt", 1, 0, synthetic_run(0.5, 4.0)}, {"alignatt", 1, 0, synthetic_run(0.5, 6.0)}};
  std::ostringstream out;
  write_capacity_json(out, report);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_DOUBLE_EQ(j["config"]["diarization_lag_limit"].get<double>(), 4.5);
  EXPECT_EQ(j["config"]["pass_rule"], report.pass_rule());
  EXPECT_EQ(j["runs"][0]["within_lag_limit"], true);
  EXPECT_EQ(j["runs"][1]["within_lag_limit"], false);
  const nlohmann::json& d = j["runs"][0]["diarization"];
  EXPECT_DOUBLE_EQ(d["p95_lag_max"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(d["max_lag"].get<double>(), 4.5);
  EXPECT_EQ(d["dropped_seconds"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(d["speaker_delay_p50"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(d["speaker_delay_p95"].get<double>(), 4.7);
  EXPECT_EQ(d["speaker_delay_words"], 4);
  EXPECT_EQ(d["committed_words"], 4);
  EXPECT_DOUBLE_EQ(d["compute_per_audio_second"].get<double>(), 0.1);
  const nlohmann::json& s = j["runs"][0]["per_session"][0]["diarization"];
  EXPECT_DOUBLE_EQ(s["p95_lag"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["speaker_delay_p50"].get<double>(), 2.5);
  EXPECT_EQ(s["committed_words"], 4);
  // The ASR's fields as without the stage.
  EXPECT_DOUBLE_EQ(j["runs"][0]["p95_lag_max"].get<double>(), 0.5);

  std::ostringstream md;
  write_capacity_markdown(md, report);
  const std::string text = md.str();
  EXPECT_NE(text.find("within = " + report.pass_rule()), std::string::npos) << text;
  EXPECT_NE(text.find("| diar p95 lag s | diar max lag s | diar dropped s | speaker delay p50 s | speaker delay p95 s "
                      "| diar compute s/s |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| yes | - | - | - | - | - | 4.00 | 4.50 | 0.0 | 2.50 | 4.70 | 0.100 |\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("| no | - | - | - | - | - | 6.00 | 6.50 | 0.0 | 2.50 | 4.70 | 0.100 |\n"), std::string::npos)
      << text;

  // Without the stage: null figures, no diarization limit, no extra columns.
  report.diarization_lag_limit.reset();
  report.rows = {{"alignatt", 1, 0, synthetic_run(0.5)}};
  std::ostringstream plain;
  write_capacity_json(plain, report);
  const nlohmann::json p = nlohmann::json::parse(plain.str());
  EXPECT_TRUE(p["config"]["diarization_lag_limit"].is_null());
  EXPECT_TRUE(p["runs"][0]["diarization"].is_null());
  EXPECT_TRUE(p["runs"][0]["per_session"][0]["diarization"].is_null());
  std::ostringstream plain_md;
  write_capacity_markdown(plain_md, report);
  EXPECT_EQ(plain_md.str().find("diar p95"), std::string::npos) << plain_md.str();
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
  report.chunk_seconds = 0.25;
  report.lag_limit = 0.75;  // the chunk + 0.5 s
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
  fast.batching = BatchFigures{30, 12, 4};
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
  EXPECT_DOUBLE_EQ(j["config"]["lag_limit"].get<double>(), 0.75);
  EXPECT_EQ(j["runs"][0]["batching"]["steps"], 30);
  EXPECT_EQ(j["runs"][0]["batching"]["graphs"], 12);
  EXPECT_DOUBLE_EQ(j["runs"][0]["batching"]["mean_batch"].get<double>(), 2.5);
  EXPECT_EQ(j["runs"][0]["batching"]["max_batch_since_load"], 4);
  EXPECT_TRUE(j["runs"][1]["batching"].is_null());
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
  EXPECT_NE(text.find("0.25 s chunks in real time; within = every session's p95 lag under 0.75 s,"), std::string::npos)
      << text;
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

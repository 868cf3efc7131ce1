// Delay accounting with a scripted processor whose commits happen at known
// (manual-clock) times: every expected number below is worked out by hand.
#include "bench/runner.h"

#include <gtest/gtest.h>

#include <mutex>

#include "bench/metrics.h"
#include "fake_processor.h"

namespace earshot::bench {
namespace {
using testing::ManualClock;
using testing::ScriptedProcessor;
using testing::word;

constexpr double kEps = 1e-9;

// 2 s of audio in 0.5 s chunks: process() calls 0..3 at audio 0.5, 1.0, 1.5,
// 2.0, then finish() as call 4. Each call takes 0.1 s.
std::map<int, testing::ScriptStep> hello_world_script() {
  return {
      {0, {{}, {word(" hello", 0.0, 0.4)}}}, {1, {{word(" hello", 0.0, 0.4)}, {word(" world", 0.5, 0.9)}}},
      {2, {{}, {word(" word", 0.5, 0.9)}}},  // position 1 changes text: its sighting restarts
      {3, {{word(" world", 0.5, 1.2)}, {}}}, {4, {{word(" again", 1.3, 1.9)}, {}}},
  };
}

TEST(RunStream, RealtimeDelaysIncludeComputation) {
  ManualClock clock;
  ScriptedProcessor p(clock, hello_world_script(), 0.1);
  std::vector<float> audio(32000, 0.0f);
  StreamOptions options;
  options.pacing = Pacing::kRealtime;
  StreamTrace t = run_stream(p, audio, options, clock);

  EXPECT_TRUE(p.warmed_up);
  EXPECT_TRUE(p.finished);
  EXPECT_EQ(p.inserted, (std::vector<size_t>{8000, 8000, 8000, 8000}));
  EXPECT_EQ(p.end_times, (std::vector<double>{0.5, 1.0, 1.5, 2.0}));
  ASSERT_EQ(t.emissions.size(), 5u);
  const double walls[] = {0.6, 1.1, 1.6, 2.1, 2.2};
  const double audios[] = {0.5, 1.0, 1.5, 2.0, 2.0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(t.emissions[i].wall, walls[i], kEps) << i;
    EXPECT_NEAR(t.emissions[i].audio, audios[i], kEps) << i;
    EXPECT_NEAR(t.emissions[i].compute, 0.1, kEps) << i;
  }
  EXPECT_EQ(t.emissions[1].committed, 1);
  EXPECT_EQ(t.emissions[1].provisional, 1);
  EXPECT_EQ(t.text, "hello world again");
  EXPECT_NEAR(t.compute_wall, 0.5, kEps);
  EXPECT_NEAR(t.elapsed_wall, 2.2, kEps);
  ASSERT_EQ(t.words.size(), 3u);
  EXPECT_NEAR(t.words[0].commit_wall, 1.1, kEps);
  EXPECT_NEAR(t.words[0].first_seen_wall, 0.6, kEps);  // provisional since emission 0
  EXPECT_NEAR(t.words[1].first_seen_wall, 2.1, kEps);  // "word" at emission 2 broke the run
  EXPECT_NEAR(t.words[2].first_seen_wall, 2.2, kEps);  // never provisional

  SystemRun run;
  run.streams.push_back(StreamRecord{0, 0, t, ""});
  std::vector<Utterance> utts = {{"u0", "u0.wav", "Hello, world again!", 2.0}};
  SystemResult s = summarize("scripted", run, utts, Pacing::kRealtime, NormalizerKind::kEnglish);
  // delays: hello 1.1-0.4, world 2.1-1.2, again 2.2-1.9
  EXPECT_EQ(s.delay.count, 3);
  EXPECT_NEAR(s.delay.values[0], 0.3, kEps);
  EXPECT_NEAR(s.delay.median, 0.7, kEps);
  EXPECT_NEAR(s.delay.p90, 0.86, kEps);  // 0.7 + 0.8 * (0.9 - 0.7)
  EXPECT_NEAR(s.delay.max, 0.9, kEps);
  EXPECT_NEAR(s.delay.mean, 1.9 / 3, kEps);
  // provisional: hello 0.6-0.4, world 2.1-1.2, again 2.2-1.9
  EXPECT_NEAR(s.provisional_delay.median, 0.3, kEps);
  EXPECT_NEAR(s.provisional_delay.min, 0.2, kEps);
  EXPECT_NEAR(s.first_word_delay.median, 0.7, kEps);
  EXPECT_NEAR(s.first_word_provisional_delay.median, 0.2, kEps);
  ASSERT_EQ(s.files.size(), 1u);
  EXPECT_NEAR(*s.files[0].time_to_first_commit, 1.1, kEps);
  EXPECT_EQ(s.words.errors(), 0);
  EXPECT_EQ(s.words.reference, 3);
  EXPECT_NEAR(s.audio_seconds, 2.0, kEps);
  EXPECT_NEAR(s.rtf_wall(), 0.25, kEps);
  ASSERT_EQ(s.sessions.size(), 1u);
  EXPECT_NEAR(*s.sessions[0].max_lag, 0.2, kEps);  // after finish(): 2.2 - 2.0
  EXPECT_NEAR(*s.sessions[0].mean_lag, 0.6 / 5, kEps);
  EXPECT_NEAR(*s.sessions[0].final_lag, 0.2, kEps);
  EXPECT_FALSE(s.rtf_cpu().has_value());
  EXPECT_FALSE(s.encoder_ms_per_pass().has_value());
}

TEST(RunStream, AsFastAsPossibleDelaysUseTheAudioClock) {
  ManualClock clock;
  ScriptedProcessor p(clock, hello_world_script(), 0.1);
  std::vector<float> audio(32000, 0.0f);
  StreamTrace t = run_stream(p, audio, StreamOptions{}, clock);
  EXPECT_NEAR(t.emissions[0].wall, 0.1, kEps);  // no waiting for audio
  EXPECT_NEAR(t.elapsed_wall, 0.5, kEps);
  SystemRun run;
  run.streams.push_back(StreamRecord{0, 0, t, ""});
  SystemResult s = summarize("scripted", run, {{"u0", "", "hello world again", 2}}, Pacing::kAsFastAsPossible,
                             NormalizerKind::kEnglish);
  // hello 1.0-0.4, world 2.0-1.2, again 2.0-1.9
  EXPECT_NEAR(s.delay.values[0], 0.1, kEps);
  EXPECT_NEAR(s.delay.values[1], 0.6, kEps);
  EXPECT_NEAR(s.delay.values[2], 0.8, kEps);
  EXPECT_NEAR(s.first_word_provisional_delay.median, 0.1, kEps);  // seen at audio 0.5
  EXPECT_FALSE(s.sessions[0].max_lag.has_value());
}

TEST(RunStream, RealtimeBacklogArrivesTogetherAndShowsAsLag) {
  ManualClock clock;
  ScriptedProcessor p(clock, {}, 1.2);
  std::vector<float> audio(32000, 0.0f);
  StreamOptions options;
  options.pacing = Pacing::kRealtime;
  StreamTrace t = run_stream(p, audio, options, clock);
  // call 0 at 0.5 ends at 1.7: chunks ending 1.0 and 1.5 are due -> one insert.
  EXPECT_EQ(p.inserted, (std::vector<size_t>{8000, 16000, 8000}));
  ASSERT_EQ(t.emissions.size(), 4u);
  EXPECT_NEAR(t.emissions[1].audio, 1.5, kEps);
  EXPECT_NEAR(t.emissions[1].wall, 2.9, kEps);
  EXPECT_NEAR(t.emissions[2].audio, 2.0, kEps);
  EXPECT_NEAR(t.emissions[3].wall, 5.3, kEps);
  SystemRun run;
  run.streams.push_back(StreamRecord{0, 0, t, ""});
  SystemResult s = summarize("slow", run, {{"u0", "", "", 2}}, Pacing::kRealtime, NormalizerKind::kEnglish);
  EXPECT_NEAR(*s.sessions[0].max_lag, 3.3, kEps);
  EXPECT_NEAR(*s.sessions[0].final_lag, 3.3, kEps);
  EXPECT_EQ(s.delay.count, 0);
}

TEST(RunStream, TimestampsBeyondTheFedAudioAreClampedAndCounted) {
  ManualClock clock;
  ScriptedProcessor p(clock, {{0, {{word(" early", 0.0, 0.9)}, {}}}}, 0.0);
  std::vector<float> audio(8000, 0.0f);
  StreamTrace t = run_stream(p, audio, StreamOptions{}, clock);
  SystemRun run;
  run.streams.push_back(StreamRecord{0, 0, t, ""});
  SystemResult s = summarize("x", run, {{"u0", "", "early", 0.5}}, Pacing::kAsFastAsPossible, NormalizerKind::kEnglish);
  EXPECT_EQ(s.future_timestamps, 1);
  EXPECT_NEAR(s.delay.max, 0.0, kEps);  // end clamped to the 0.5 s fed
}

TEST(RunSystem, SessionsRotateFilesCollectStatsAndSurviveFailures) {
  std::vector<std::vector<float>> audio = {std::vector<float>(8000), std::vector<float>(16000),
                                           std::vector<float>(4000)};
  std::vector<std::unique_ptr<ManualClock>> clocks;
  std::mutex m;
  int made = 0;
  ProcessorFactory factory = [&]() {
    std::lock_guard<std::mutex> lock(m);
    // Every processor shares a throwaway clock; timing is not under test here.
    clocks.push_back(std::make_unique<ManualClock>());
    auto p = std::make_unique<ScriptedProcessor>(*clocks.back(), std::map<int, testing::ScriptStep>{}, 0.0);
    if (made++ == 1) p->fail_at_call = 0;  // the second stream fails
    StreamHandle h;
    h.processor = std::move(p);
    // Counters read before the stream (after warmup) and after it: the run
    // reports the difference.
    auto reads = std::make_shared<int>(0);
    h.stats = [reads] {
      const int k = (*reads)++;
      ComputeStats s;
      s.available = true;
      s.encoder_passes = 1 + 2 * k;
      s.encoder_seconds = 0.25 + 0.5 * k;
      s.decoder_calls = 3 + 10 * k;
      s.decoder_seconds = 1.0 * k;
      return s;
    };
    return h;
  };
  std::vector<std::pair<int, int>> progress;
  SystemRun run = run_system(
      factory, audio, StreamOptions{}, 2,
      [&](int session, int done, int) {
        std::lock_guard<std::mutex> lock(m);
        progress.emplace_back(session, done);
      },
      [] { return std::make_unique<ManualClock>(); });
  ASSERT_EQ(run.streams.size(), 6u);
  EXPECT_EQ(progress.size(), 6u);
  // Sorted by session then file; each session saw every file once.
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(run.streams[i].session, i / 3);
    EXPECT_EQ(run.streams[i].file, i % 3);
  }
  int failures = 0;
  for (const auto& s : run.streams) failures += !s.error.empty();
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(run.stats.encoder_passes, 10);  // the failed stream reports no stats
  SystemResult s = summarize("x", run, {{"a", "", "", 0.5}, {"b", "", "", 1}, {"c", "", "", 0.25}},
                             Pacing::kAsFastAsPossible, NormalizerKind::kEnglish);
  EXPECT_EQ(s.failed_streams, 1);
  EXPECT_EQ(s.sessions.size(), 2u);
  EXPECT_NEAR(*s.encoder_ms_per_pass(), 250.0, kEps);
  EXPECT_NEAR(*s.decoder_ms_per_pass(), 500.0, kEps);
}

TEST(Distribution, Percentiles) {
  Distribution d = make_distribution({5, 1, 3, 2, 4});
  EXPECT_EQ(d.count, 5);
  EXPECT_DOUBLE_EQ(d.median, 3);
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_EQ(make_distribution({}).count, 0);
}

}  // namespace
}  // namespace earshot::bench

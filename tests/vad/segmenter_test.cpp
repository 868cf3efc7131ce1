// Speech start/end rules (Silero's VADIterator) on synthetic probability
// sequences with exact expected events, and end to end on jfk.wav.
#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/vad/test_util.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

using Kind = SpeechEvent::Kind;

struct IndexedEvent {
  size_t window;  // index of the probability that produced the event
  SpeechEvent event;
  bool operator==(const IndexedEvent&) const = default;
};

void PrintTo(const IndexedEvent& e, std::ostream* os) {
  *os << "{window " << e.window << ", " << (e.event.kind == Kind::kSpeechStart ? "start" : "end") << " at "
      << e.event.sample << "}";
}

std::vector<IndexedEvent> run(SpeechSegmenter& segmenter, const std::vector<float>& probs) {
  std::vector<IndexedEvent> events;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (auto e = segmenter.push(probs[i])) events.push_back({i, *e});
  }
  return events;
}

std::vector<IndexedEvent> run(const std::vector<float>& probs, SegmenterOptions options = {}) {
  SpeechSegmenter segmenter(options);
  return run(segmenter, probs);
}

IndexedEvent start(size_t window, int64_t sample) { return {window, {Kind::kSpeechStart, sample}}; }
IndexedEvent end(size_t window, int64_t sample) { return {window, {Kind::kSpeechEnd, sample}}; }

// Defaults: 512-sample windows, pad 30 ms = 480 samples, min silence 100 ms = 1600 samples.
TEST(SpeechSegmenter, StartIsPaddedAndEndFollowsMinSilence) {
  // Window 2 is the first speech window: start = 2*512 - 480. Window 5 is the first
  // silent one (ends at 3072); the end is decided once 1600 samples have passed from
  // there, at window 9 (ends at 5120), and lies at 5*512 + 480.
  EXPECT_EQ(run({0.1f, 0.1f, 0.9f, 0.9f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}),
            (std::vector{start(2, 544), end(9, 3040)}));
}

// end_pending(): in speech, from the first silent window until the end is
// decided or speech comes back (what a session skips model passes on).
TEST(SpeechSegmenter, AnEndIsPendingFromTheFirstSilentWindowToItsDecision) {
  SpeechSegmenter segmenter;
  std::vector<bool> pending;
  for (float p : {0.1f, 0.9f, 0.9f, 0.1f, 0.1f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}) {
    segmenter.push(p);
    pending.push_back(segmenter.end_pending());
  }
  // Silence before any speech is no pending end; the gap at windows 3-4 is one, cancelled
  // by window 5; the silence from window 6 is one until window 10 decides it.
  EXPECT_EQ(pending, (std::vector<bool>{false, false, false, true, true, false, true, true, true, true, false, false}));
  EXPECT_FALSE(segmenter.in_speech());
  // Windows between the thresholds keep the silence going but not pending past
  // min_silence (1,600 samples: the fourth window after the first silent one).
  SpeechSegmenter band;
  pending.clear();
  for (float p : {0.9f, 0.1f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.1f}) {
    band.push(p);
    pending.push_back(band.end_pending());
  }
  EXPECT_EQ(pending, (std::vector<bool>{false, true, true, true, true, false, false, false, false}));
  EXPECT_FALSE(band.in_speech());  // the last silent window decided it
}

// What decided_until() promises: no later event (nor the end finish() gives)
// points before it, and it never runs past the windows consumed; in speech it is
// the windows consumed, in a pause one pad before them (random sequences over
// both thresholds and the band between, with several pads and silences).
TEST(SpeechSegmenter, NoEventPointsBeforeWhatWasDecided) {
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  };
  for (int pad_ms : {0, 30, 100}) {
    for (int silence_ms : {0, 100, 300}) {
      SegmenterOptions options;
      options.speech_pad_ms = pad_ms;
      options.min_silence_ms = silence_ms;
      SpeechSegmenter segmenter(options);
      const int64_t pad = pad_ms * 16;
      int64_t decided = 0, consumed = 0;
      bool speech = false;
      for (int i = 0; i < 4000; ++i) {
        // Runs of speech, silence or the band, so segments open and close often.
        if (i % 7 == 0) speech = next() < 0.5f;
        const float p = speech ? 0.5f + 0.5f * next() : 0.45f * next();
        const std::optional<SpeechEvent> e = segmenter.push(p);
        consumed += options.window_samples;
        if (e) {
          EXPECT_GE(e->sample, decided) << "window " << i << " pad " << pad_ms << " silence " << silence_ms;
        }
        const int64_t now = segmenter.decided_until();
        EXPECT_GE(now, decided) << "window " << i;
        EXPECT_LE(now, consumed) << "window " << i;
        if (segmenter.in_speech() && p >= 0.5f) {
          EXPECT_EQ(now, consumed) << "window " << i;
        }
        if (!segmenter.in_speech()) {
          EXPECT_GE(now, consumed - pad) << "window " << i;
        }
        decided = now;
      }
      if (const std::optional<SpeechEvent> e = segmenter.finish(consumed + 100)) {
        EXPECT_GE(e->sample, decided);
      }
    }
  }
}

TEST(SpeechSegmenter, StartIsClampedAtStreamStart) {
  EXPECT_EQ(run({0.8f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}), (std::vector{start(0, 0), end(5, 992)}));
}

TEST(SpeechSegmenter, ThresholdIsInclusive) { EXPECT_EQ(run({0.49f, 0.5f}), (std::vector{start(1, 32)})); }

TEST(SpeechSegmenter, GapShorterThanMinSilenceDoesNotSplit) {
  // 4 silent windows (3 full windows = 1536 < 1600 counted after the first), then speech
  // cancels the pending end; the later silence (windows 7..11) ends the segment.
  EXPECT_EQ(run({0.9f, 0.1f, 0.1f, 0.1f, 0.1f, 0.9f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f}),
            (std::vector{start(0, 0), end(11, 7 * 512 + 480)}));
}

TEST(SpeechSegmenter, HysteresisBandNeitherStartsNorEnds) {
  // 0.4 is between the negative threshold (0.35) and the threshold (0.5).
  EXPECT_TRUE(run({0.4f, 0.4f, 0.4f, 0.4f}).empty());
  EXPECT_EQ(run({0.9f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f, 0.34f, 0.3f, 0.3f, 0.3f, 0.3f}),
            (std::vector{start(0, 0), end(12, 8 * 512 + 480)}));
}

TEST(SpeechSegmenter, BandWindowsKeepAPendingEndButDoNotEmitIt) {
  // Silence starts at window 1; the band windows 2..4 neither cancel it nor emit; the
  // end comes with the next window below 0.35 (window 5: 2048 samples after window 1).
  EXPECT_EQ(run({0.9f, 0.2f, 0.4f, 0.4f, 0.4f, 0.2f}), (std::vector{start(0, 0), end(5, 512 + 480)}));
  // Without that window, nothing ends.
  EXPECT_EQ(run({0.9f, 0.2f, 0.4f, 0.4f, 0.4f, 0.4f, 0.4f}), (std::vector{start(0, 0)}));
}

TEST(SpeechSegmenter, ExplicitNegativeThreshold) {
  EXPECT_EQ(run({0.9f, 0.45f, 0.45f, 0.45f, 0.45f, 0.45f}, {.negative_threshold = 0.46f}),
            (std::vector{start(0, 0), end(5, 512 + 480)}));
  EXPECT_EQ(run({0.9f, 0.45f, 0.45f, 0.45f, 0.45f, 0.45f}), (std::vector{start(0, 0)}));
}

TEST(SpeechSegmenter, CustomSilenceAndPad) {
  // min silence 0: the end is decided at the first silent window; pad 0: no widening.
  EXPECT_EQ(run({0.0f, 0.9f, 0.0f, 0.9f, 0.9f, 0.0f}, {.min_silence_ms = 0, .speech_pad_ms = 0}),
            (std::vector{start(1, 512), end(2, 1024), start(3, 1536), end(5, 2560)}));
  // A pad wider than the window: events never go past the audio consumed nor overlap.
  EXPECT_EQ(run({0.9f, 0.0f, 0.9f, 0.0f}, {.min_silence_ms = 0, .speech_pad_ms = 40}),
            (std::vector{start(0, 0), end(1, 1024), start(2, 1024), end(3, 2048)}));
}

TEST(SpeechSegmenter, FinishClosesAnOpenSegment) {
  SpeechSegmenter open_segment;
  run(open_segment, {0.0f, 0.9f, 0.9f});
  EXPECT_TRUE(open_segment.in_speech());
  EXPECT_EQ(open_segment.finish(1500), (SpeechEvent{Kind::kSpeechEnd, 1500}));
  EXPECT_FALSE(open_segment.in_speech());
  EXPECT_EQ(open_segment.finish(1600), std::nullopt);

  // Silence had started (window 2): the pending padded end, 2*512 + 480.
  SpeechSegmenter pending_end;
  run(pending_end, {0.9f, 0.9f, 0.1f, 0.1f});
  EXPECT_EQ(pending_end.finish(2048), (SpeechEvent{Kind::kSpeechEnd, 1504}));

  SpeechSegmenter quiet;
  run(quiet, {0.1f, 0.2f});
  EXPECT_EQ(quiet.finish(1024), std::nullopt);
}

TEST(SpeechSegmenter, ResetRestartsStreamTime) {
  SpeechSegmenter segmenter;
  run(segmenter, {0.1f, 0.1f, 0.9f});
  segmenter.reset();
  EXPECT_FALSE(segmenter.in_speech());
  EXPECT_EQ(run(segmenter, {0.1f, 0.9f}), (std::vector{start(1, 32)}));
}

TEST(SpeechSegmenter, RejectsBadOptions) {
  auto message = [](SegmenterOptions options) {
    try {
      SpeechSegmenter segmenter(options);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.threshold = 0.0f}), "VAD segmenter: threshold must be in (0, 1], got 0.000000");
  EXPECT_EQ(message({.threshold = 0.5f, .negative_threshold = 0.6f}),
            "VAD segmenter: negative_threshold must be <= threshold, got 0.600000 > 0.500000");
  EXPECT_EQ(message({.min_silence_ms = -1}), "VAD segmenter: min_silence_ms must be >= 0, got -1");
  EXPECT_EQ(message({.speech_pad_ms = -5}), "VAD segmenter: speech_pad_ms must be >= 0, got -5");
  EXPECT_EQ(message({.window_samples = 0}), "VAD segmenter: window_samples must be > 0, got 0");
}

// Events the documented rules give on a probability sequence over `total` samples,
// closing the stream the way SpeechDetector::finish does.
std::vector<SpeechEvent> segments_from_probs(const std::vector<float>& probs, int64_t total) {
  SpeechSegmenter segmenter;
  std::vector<SpeechEvent> events;
  for (float p : probs) {
    if (auto e = segmenter.push(p)) events.push_back(*e);
  }
  if (auto e = segmenter.finish(total)) events.push_back(*e);
  for (auto& e : events) e.sample = std::min(e.sample, total);
  return events;
}

std::vector<SpeechEvent> detect(const std::vector<float>& samples, size_t chunk) {
  SpeechDetector detector(test::silero());
  std::vector<SpeechEvent> events;
  for (size_t pos = 0; pos < samples.size(); pos += chunk) {
    auto update = detector.push(std::span(samples).subspan(pos, std::min(chunk, samples.size() - pos)));
    events.insert(events.end(), update.events.begin(), update.events.end());
  }
  auto tail = detector.finish();
  events.insert(events.end(), tail.events.begin(), tail.events.end());
  return events;
}

TEST(SpeechDetector, JfkSegmentsEqualThoseOfTheReferenceProbabilities) {
  const std::vector<SpeechEvent> expected = segments_from_probs(test::reference_probs(), 176000);
  ASSERT_GE(expected.size(), 4u);  // jfk.wav has several pauses
  for (size_t chunk : {160u, 512u, 3000u}) {
    const std::vector<SpeechEvent> events = detect(test::jfk(), chunk);
    EXPECT_EQ(events, expected) << "chunk " << chunk;
  }
  for (const auto& e : expected) {
    std::printf("%s %.3f s\n", e.kind == Kind::kSpeechStart ? "start" : "end  ", e.seconds());
  }
  // Starts and ends alternate, in order.
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].kind, i % 2 == 0 ? Kind::kSpeechStart : Kind::kSpeechEnd);
    if (i > 0) {
      EXPECT_GE(expected[i].sample, expected[i - 1].sample);
    }
  }
}

TEST(SpeechDetector, SilenceHasNoSpeechEvents) {
  const std::vector<float> silence(10 * kSampleRate + 100, 0.0f);
  SpeechDetector detector(test::silero());
  EXPECT_TRUE(detector.push(silence).events.empty());
  EXPECT_FALSE(detector.in_speech());
  EXPECT_TRUE(detector.finish().events.empty());
}

TEST(SpeechDetector, ResetGivesTheSameEventsAgain) {
  SpeechDetector detector(test::silero());
  const auto first = detector.push(test::jfk()).events;
  detector.reset();
  EXPECT_EQ(detector.push(test::jfk()).events, first);
}

}  // namespace
}  // namespace earshot::vad

// Silero probabilities from our ggml graph: parity with whisper.cpp, an
// independent scalar implementation, chunking independence, per-session state
// and concurrent sessions on one shared model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>

#include "common/error.h"
#include "tests/vad/test_util.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

using test::jfk;
using test::silero;

// All probabilities of a stream pushed in chunks of `chunk` samples, plus the flushed tail.
std::vector<float> run_chunked(VadSession& session, std::span<const float> samples, size_t chunk) {
  std::vector<float> probs;
  for (size_t pos = 0; pos < samples.size(); pos += chunk) {
    auto part = session.push(samples.subspan(pos, std::min(chunk, samples.size() - pos)));
    probs.insert(probs.end(), part.begin(), part.end());
  }
  if (auto tail = session.flush()) probs.push_back(*tail);
  return probs;
}

std::vector<float> run_whole(std::span<const float> samples, VadSessionOptions options = {}) {
  VadSession session(silero(), options);
  return run_chunked(session, samples, samples.size() + 1);
}

// The whisper.cpp reference file was computed by a different whisper.cpp build
// than the pinned libwhisper 1.9.1: it differs from it by up to 0.018 (even on the
// all-zero first window, 0.001537 vs 0.001695), while our probabilities equal
// libwhisper 1.9.1's (LibWhisperOracle below) and the scalar model's. This test
// pins the observed agreement with the file: every window within 0.02, and on
// the same side of the 0.5 and 0.35 thresholds, so speech segments coincide.
TEST(VadSession, AgreesWithWhisperCppReferenceFileOnJfk) {
  const std::vector<float> expected = test::reference_probs();
  ASSERT_EQ(expected.size(), 344u);
  ASSERT_EQ(jfk().size(), 176000u);
  const std::vector<float> probs = run_whole(jfk());
  ASSERT_EQ(probs.size(), expected.size());  // 343 full windows + the zero-padded tail
  double max_diff = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(probs[i]) - expected[i]));
    EXPECT_NEAR(probs[i], expected[i], 0.02) << "window " << i;
    EXPECT_EQ(probs[i] >= 0.5f, expected[i] >= 0.5f) << "window " << i;
    EXPECT_EQ(probs[i] < 0.35f, expected[i] < 0.35f) << "window " << i;
  }
  std::printf("max |p - p_reference_file| over %zu windows: %.4g\n", probs.size(), max_diff);
}

TEST(VadSession, ContextModesDifferOnlyWhereContextMatters) {
  const std::vector<float> reflect = run_whole(jfk());
  const std::vector<float> previous = run_whole(jfk(), {.context = WindowContext::kPreviousSamples});
  ASSERT_EQ(reflect.size(), previous.size());
  // jfk.wav starts with 699 zero samples: the first two windows see identical input.
  EXPECT_EQ(reflect[0], previous[0]);
  EXPECT_EQ(reflect[1], previous[1]);
  EXPECT_NE(reflect[2], previous[2]);
}

TEST(VadSession, ChunkSizeDoesNotChangeProbabilities) {
  for (WindowContext mode : {WindowContext::kReflect, WindowContext::kPreviousSamples}) {
    const std::vector<float> whole = run_whole(jfk(), {.context = mode});
    for (size_t chunk : {1u, 160u, 511u, 512u, 513u, 3000u}) {
      VadSession session(silero(), {.context = mode});
      EXPECT_EQ(run_chunked(session, jfk(), chunk), whole) << "chunk " << chunk;
    }
  }
}

TEST(VadSession, ReturnsOneProbabilityPerCompletedWindow) {
  VadSession session(silero());
  EXPECT_TRUE(session.push(std::span(jfk()).first(511)).empty());
  EXPECT_EQ(session.push(std::span(jfk()).subspan(511, 1)).size(), 1u);
  EXPECT_EQ(session.push(std::span(jfk()).subspan(512, 0)).size(), 0u);
  EXPECT_EQ(session.push(std::span(jfk()).subspan(512, 1024 + 100)).size(), 2u);
  EXPECT_EQ(session.samples_pushed(), 512 + 1024 + 100);
  EXPECT_EQ(session.windows_computed(), 3);
  EXPECT_TRUE(session.flush().has_value());
  EXPECT_FALSE(session.flush().has_value());  // nothing pending any more
  EXPECT_EQ(session.windows_computed(), 4);
}

TEST(VadSession, ResetRestartsTheStream) {
  const std::vector<float> whole = run_whole(jfk());
  VadSession session(silero());
  run_chunked(session, std::span(jfk()).subspan(50000, 30000), 700);  // leaves LSTM state and a partial window
  session.push(std::span(jfk()).first(100));
  session.reset();
  EXPECT_EQ(session.samples_pushed(), 0);
  EXPECT_EQ(run_chunked(session, jfk(), 4096), whole);
}

TEST(VadSession, LstmStateCarriesAcrossWindows) {
  // The same window after different histories gives different probabilities.
  const std::span<const float> window = std::span(jfk()).subspan(60 * 512, 512);
  VadSession fresh(silero());
  VadSession primed(silero());
  primed.push(std::span(jfk()).first(60 * 512));
  EXPECT_NE(fresh.push(window).at(0), primed.push(window).at(0));
}

TEST(VadSession, SilenceIsNotSpeech) {
  const std::vector<float> silence(5 * kSampleRate, 0.0f);
  for (float p : run_whole(silence)) EXPECT_LT(p, 0.05f);
}

TEST(VadSession, NonFiniteSamplesCountAsZeros) {
  std::vector<float> poisoned = jfk();
  std::vector<float> zeroed = jfk();
  for (size_t i = 20000; i < 20100; ++i) {
    poisoned[i] = (i % 2) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    zeroed[i] = 0.0f;
  }
  const std::vector<float> probs = run_whole(poisoned);
  EXPECT_EQ(probs, run_whole(zeroed));
  for (float p : probs) EXPECT_TRUE(std::isfinite(p));
}

TEST(VadSession, TwoSessionsInTwoThreadsEqualEachAlone) {
  const std::vector<float> other =
      test::read_wav_s16_mono_16k(test::shared_path("data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"));
  const std::vector<float> alone_a = run_whole(jfk());
  const std::vector<float> alone_b = run_whole(other);
  std::vector<float> threaded_a, threaded_b;
  {
    std::jthread a([&] {
      VadSession s(silero());
      threaded_a = run_chunked(s, jfk(), 160);
    });
    std::jthread b([&] {
      VadSession s(silero());
      threaded_b = run_chunked(s, other, 160);
    });
  }
  EXPECT_EQ(threaded_a, alone_a);
  EXPECT_EQ(threaded_b, alone_b);
}

// The server's scheduler runs a session's work on whichever thread is free: sessions
// hop between threads from chunk to chunk while others run at the same time.
TEST(VadSession, SessionsHoppingBetweenThreadsEqualEachAlone) {
  const std::vector<float> alone = run_whole(jfk());
  constexpr int kSessions = 4;
  constexpr size_t kChunk = 4000;
  std::vector<VadSession> sessions;
  for (int i = 0; i < kSessions; ++i) sessions.emplace_back(silero());
  std::vector<std::vector<float>> probs(kSessions);
  for (size_t pos = 0; pos < jfk().size(); pos += kChunk) {
    std::vector<std::jthread> round;
    for (int i = 0; i < kSessions; ++i) {
      round.emplace_back([&, i] {
        auto part = sessions[i].push(std::span(jfk()).subspan(pos, std::min(kChunk, jfk().size() - pos)));
        probs[i].insert(probs[i].end(), part.begin(), part.end());
      });
    }
  }
  for (int i = 0; i < kSessions; ++i) {
    probs[i].push_back(sessions[i].flush().value());
    EXPECT_EQ(probs[i], alone) << "session " << i;
  }
}

TEST(VadSession, MovedSessionContinuesTheStream) {
  const std::vector<float> alone = run_whole(jfk());
  VadSession first(silero());
  std::vector<float> probs = first.push(std::span(jfk()).first(100000));
  VadSession moved = std::move(first);
  auto rest = moved.push(std::span(jfk()).subspan(100000));
  probs.insert(probs.end(), rest.begin(), rest.end());
  probs.push_back(moved.flush().value());
  EXPECT_EQ(probs, alone);
}

TEST(VadSession, RejectsBadOptions) {
  EXPECT_THROW(VadSession(nullptr), Error);
  try {
    VadSession session(silero(), {.n_threads = 0});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "VadSession n_threads must be >= 1 (got 0)");
  }
}

}  // namespace
}  // namespace earshot::vad

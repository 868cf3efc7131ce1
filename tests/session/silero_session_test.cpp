// The real Silero VAD (shared weights) driving a session: speech segments of
// jfk.wav reach the model, pauses do not, and the result does not depend on
// how the audio was chunked or when steps ran.
#include <gtest/gtest.h>

#include <random>

#include "audio/audio.h"
#include "fakes.h"
#include "protocol/wlk/projection.h"
#include "session/silero_vad.h"
#include "session/stream_session.h"

namespace earshot::session {
namespace {

// The lines asserted here are WhisperLiveKit's projection of the session's events.
using protocol::wlk::format_protocol_time;
using protocol::wlk::Line;

std::string run(const std::shared_ptr<const vad::VadModel>& model, const std::vector<float>& audio, size_t piece,
                unsigned seed, std::vector<std::pair<double, double>>* silences = nullptr) {
  auto processor = std::make_unique<testing::FakeProcessor>();
  auto* fake = processor.get();
  StreamSession session(std::move(processor), std::make_unique<SileroVad>(model), {});
  std::mt19937 rng(seed);
  for (size_t i = 0; i < audio.size(); i += piece) {
    session.push_audio(std::span<const float>(audio).subspan(i, std::min(piece, audio.size() - i)));
    if (rng() % 3 == 0 && session.has_work()) session.step();
  }
  session.end_of_stream();
  while (session.has_work()) session.step();
  if (silences) *silences = fake->silences_;
  std::string out;
  for (const Line& l : protocol::wlk::snapshot_of(session).lines)
    out += std::to_string(l.speaker) + l.text + "@" + format_protocol_time(l.start) + "-" +
           format_protocol_time(l.end) + "\n";
  return out;
}

TEST(SileroSession, JfkSegmentsIndependentOfChunking) {
  auto model = vad::VadModel::load(EARSHOT_SHARED_DIR "/models/silero-v6.2.0-ggml.bin");
  std::vector<float> jfk = audio::load_file(EARSHOT_SHARED_DIR "/data/jfk.wav");
  std::vector<std::pair<double, double>> silences;
  std::string whole = run(model, jfk, jfk.size(), 1, &silences);
  // JFK pauses between phrases: several speech segments, each announced by end_silence.
  EXPECT_GE(silences.size(), 3u);
  for (const auto& [duration, offset] : silences) {
    EXPECT_GE(duration, 0.0);
    EXPECT_LT(duration, 5.0);  // no pause in jfk.wav is long enough for a silence line
    EXPECT_LE(offset, 11.0);
  }
  EXPECT_EQ(whole.find("-2"), std::string::npos);
  EXPECT_NE(whole, "");
  for (size_t piece : {512u, 1600u, 777u, 16000u})
    EXPECT_EQ(run(model, jfk, piece, static_cast<unsigned>(piece)), whole) << piece;
}

TEST(SileroSession, DecisionDelayCoversEndEvents) {
  vad::SegmenterOptions options;
  SileroVad detector(vad::VadModel::load(EARSHOT_SHARED_DIR "/models/silero-v6.2.0-ggml.bin"), options);
  // 100 ms min silence = 4 windows after the first silent one, +30 ms pad, +1 partial window.
  EXPECT_GE(detector.max_event_delay_samples(), 5 * 512 + 480);
}

// Speech reaches the model as soon as the VAD has decided it is speech, not a
// worst-case decision delay (222 ms) later: while a detector fed the same audio
// is in speech with no end pending, the model has every sample but the VAD's
// partial window and at most one whole window (20 ms pieces, a step after each).
TEST(SileroSession, SpeechReachesTheModelOnceDecided) {
  auto model = vad::VadModel::load(EARSHOT_SHARED_DIR "/models/silero-v6.2.0-ggml.bin");
  const std::vector<float> jfk = audio::load_file(EARSHOT_SHARED_DIR "/data/jfk.wav");
  auto processor = std::make_unique<testing::FakeProcessor>();
  auto* fake = processor.get();
  StreamOptions options;
  options.min_step_seconds = 0.02;
  StreamSession session(std::move(processor), std::make_unique<SileroVad>(model), options);
  vad::SpeechDetector twin(model);
  constexpr size_t kPiece = 320;
  int checked = 0;
  for (size_t i = 0; i + kPiece <= jfk.size(); i += kPiece) {
    const std::span<const float> piece = std::span<const float>(jfk).subspan(i, kPiece);
    session.push_audio(piece);
    twin.push(piece);
    while (session.has_work()) session.step();
    if (!twin.in_speech() || twin.end_pending()) continue;
    const double pushed = static_cast<double>(i + kPiece) / 16000.0;
    EXPECT_LE(pushed - fake->inserted_until(), 2 * 512 / 16000.0) << "at " << pushed << " s";
    ++checked;
  }
  EXPECT_GT(checked, 100);  // jfk.wav is mostly speech
}

}  // namespace
}  // namespace earshot::session

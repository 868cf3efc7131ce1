// The two-speaker conversation tool (tools/make_conversation): its RTTM truth
// must agree with its audio. Checked three ways: the truth's shape (two
// speakers, turns, pauses, overlaps), the audio's energy where the truth has
// speech and where it has none, and Silero VAD run on the audio against the
// truth's speech (an independent detector, scored with the DER scorer's
// missed and false-alarm speech). The tool is run as built; nothing is kept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "audio/wav.h"
#include "bench/der.h"
#include "vad/vad.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;

constexpr double kRate = 16000;

struct Made {
  std::vector<float> samples;
  std::vector<SpeakerSegment> truth;
  std::string wav_bytes, rttm_text;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Made make(const std::string& tag) {
  const fs::path dir = fs::temp_directory_path() / ("earshot-conversation-" + std::to_string(::getpid()) + tag);
  fs::create_directories(dir);
  const std::string command = std::string(EARSHOT_MAKE_CONVERSATION) + " --data " + EARSHOT_SHARED_DIR +
                              "/data --wav " + (dir / "c.wav").string() + " --rttm " + (dir / "c.rttm").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  Made m;
  m.samples = audio::load_wav_file(dir / "c.wav");
  m.truth = read_rttm(dir / "c.rttm");
  m.wav_bytes = slurp(dir / "c.wav");
  m.rttm_text = slurp(dir / "c.rttm");
  fs::remove_all(dir);
  return m;
}

const Made& conversation() {
  static const Made m = make("");
  return m;
}

double rms_db(const std::vector<float>& x, double from, double to) {
  const auto a = static_cast<size_t>(std::max(0.0, from) * kRate);
  const auto b = std::min(x.size(), static_cast<size_t>(to * kRate));
  if (b <= a) return -200;
  double sum = 0;
  for (size_t i = a; i < b; ++i) sum += double(x[i]) * x[i];
  return 10 * std::log10(sum / static_cast<double>(b - a) + 1e-20);
}

bool in_speech(const std::vector<SpeakerSegment>& truth, double t, double margin) {
  return std::any_of(truth.begin(), truth.end(),
                     [&](const auto& s) { return t >= s.start - margin && t < s.end() + margin; });
}

TEST(Conversation, TwoSpeakersTakeTurnsWithPausesAndOverlaps) {
  const Made& m = conversation();
  ASSERT_FALSE(m.truth.empty());
  std::vector<std::string> speakers;
  for (const auto& s : m.truth) speakers.push_back(s.speaker);
  std::sort(speakers.begin(), speakers.end());
  speakers.erase(std::unique(speakers.begin(), speakers.end()), speakers.end());
  EXPECT_EQ(speakers, (std::vector<std::string>{"jfk", "reader"}));
  // Turns: speaker changes in start order.
  int changes = 0;
  for (size_t i = 1; i < m.truth.size(); ++i) changes += m.truth[i].speaker != m.truth[i - 1].speaker;
  EXPECT_GE(changes, 5);
  // Overlaps between the two speakers, each of at least 0.5 s.
  int overlaps = 0;
  for (const auto& a : m.truth)
    for (const auto& b : m.truth)
      if (a.speaker == "jfk" && b.speaker == "reader" && std::min(a.end(), b.end()) - std::max(a.start, b.start) >= 0.5)
        ++overlaps;
  EXPECT_GE(overlaps, 2);
  // Pauses of at least 0.5 s where nobody speaks, inside the conversation.
  int pauses = 0;
  double covered_until = m.truth.front().end();
  for (const auto& s : m.truth) {
    if (s.start - covered_until >= 0.5) ++pauses;
    covered_until = std::max(covered_until, s.end());
  }
  EXPECT_GE(pauses, 4);
  // The audio: 16 kHz, a little longer than the last speech.
  const double seconds = static_cast<double>(m.samples.size()) / kRate;
  EXPECT_NEAR(seconds, covered_until + 0.5, 0.01);
  // Scored against itself the truth has no error; 4 s and more of it overlap.
  const DerScore self = score_der(m.truth, m.truth);
  EXPECT_EQ(self.der_percent(), 0);
  EXPECT_GT(self.scored_speaker - self.scored_speech, 1.5);
}

TEST(Conversation, EnergyWhereTheTruthHasSpeechQuietWhereItHasNone) {
  const Made& m = conversation();
  const double seconds = static_cast<double>(m.samples.size()) / kRate;
  // Every truth segment is loud: its level within 30 dB of the mix's
  // loudest 20 ms frame, and its loudest frame within 10 dB.
  double loudest = -200;
  for (double t = 0; t + 0.02 <= seconds; t += 0.02) loudest = std::max(loudest, rms_db(m.samples, t, t + 0.02));
  for (const auto& s : m.truth) {
    SCOPED_TRACE(s.speaker + " at " + std::to_string(s.start));
    EXPECT_GT(rms_db(m.samples, s.start, s.end()), loudest - 30);
    double peak = -200;
    for (double t = s.start; t + 0.02 <= s.end(); t += 0.02) peak = std::max(peak, rms_db(m.samples, t, t + 0.02));
    EXPECT_GT(peak, loudest - 10);
  }
  // Every 20 ms frame 50 ms or more away from truth speech is quiet: 27 dB
  // under the loudest frame (the sources' own background, or digital silence;
  // the truth's rule is 30 dB under each clip's loudest frame on the clip's
  // own frame grid, and JFK's background comes within 30 dB on the mix's).
  int quiet_frames = 0;
  for (double t = 0; t + 0.02 <= seconds; t += 0.02) {
    if (in_speech(m.truth, t, 0.05) || in_speech(m.truth, t + 0.02, 0.05)) continue;
    ++quiet_frames;
    EXPECT_LT(rms_db(m.samples, t, t + 0.02), loudest - 27) << "frame at " << t << " s";
  }
  EXPECT_GT(quiet_frames, 100);  // 2 s of pauses at least
  // Before the first speech the audio is digital silence.
  EXPECT_EQ(rms_db(m.samples, 0, m.truth.front().start - 0.3), -200);
}

TEST(Conversation, SileroVadFindsTheTruthsSpeech) {
  const Made& m = conversation();
  auto model = vad::VadModel::load(fs::path(EARSHOT_SHARED_DIR) / "models/silero-v6.2.0-ggml.bin");
  vad::SpeechDetector detector(model);
  std::vector<vad::SpeechEvent> events = detector.push(m.samples).events;
  for (const auto& e : detector.finish().events) events.push_back(e);
  // Speech alone, one label each side: the DER scorer's missed and
  // false-alarm speech compare the two.
  std::vector<SpeakerSegment> found, truth;
  for (size_t i = 0; i + 1 < events.size(); i += 2) {
    ASSERT_EQ(events[i].kind, vad::SpeechEvent::Kind::kSpeechStart);
    found.push_back({"c", "1", events[i].seconds(), events[i + 1].seconds() - events[i].seconds(), "speech"});
  }
  for (const auto& s : m.truth) truth.push_back({"c", "1", s.start, s.duration, "speech:" + s.speaker});
  // Missed and false-alarm speech are speaker-blind (overlap counts once).
  DerOptions options;
  options.collar = 0.25;
  const DerScore s = score_der(truth, found, options);
  const double missed = s.missed_speech / s.scored_speech, falarm = s.falarm_speech / s.scored_speech;
  RecordProperty("vad_missed_speech_percent", std::to_string(100 * missed));
  RecordProperty("vad_falarm_speech_percent", std::to_string(100 * falarm));
  EXPECT_LT(missed, 0.05) << "missed " << s.missed_speech << " s of " << s.scored_speech << " s";
  EXPECT_LT(falarm, 0.05) << "false alarm " << s.falarm_speech << " s of " << s.scored_speech << " s";
}

TEST(Conversation, SameBytesEveryTime) {
  const Made again = make("-again");
  EXPECT_TRUE(again.wav_bytes == conversation().wav_bytes);
  EXPECT_EQ(again.rttm_text, conversation().rttm_text);
}

}  // namespace
}  // namespace earshot::bench

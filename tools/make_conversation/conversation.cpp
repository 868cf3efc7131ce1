#include "tools/make_conversation/conversation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <tuple>

#include "audio/wav.h"
#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::tools {
namespace {

constexpr double kRate = kSampleRate;
constexpr size_t kFrame = kSampleRate / 50;  // 20 ms
constexpr double kRangeDb = 30.0;            // speech: within this of the clip's loudest frame
constexpr double kCloseGap = 0.3;            // shorter pauses stay inside one segment
constexpr double kPad = 0.05;

// A stretch of one source clip placed in the conversation.
struct Piece {
  std::string speaker;
  const std::vector<float>* clip;
  double begin, end;                     // within the clip, seconds
  std::vector<bench::TimeRange> speech;  // within the clip, inside [begin, end]
};

std::vector<float> load(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw Error(ErrorCode::kIo, "conversation source " + path.string() +
                                    " is missing (the tests' ../shared/data: jfk.wav and librivox/)");
  return audio::load_wav_file(path);
}

// The clip cut at the middle of its `cuts` longest pauses, in time order.
std::vector<Piece> split_at_pauses(const std::string& speaker, const std::vector<float>& clip, size_t cuts) {
  const std::vector<bench::TimeRange> speech = speech_in_clip(clip);
  std::vector<std::pair<double, double>> gaps;  // (length, middle)
  for (size_t i = 1; i < speech.size(); ++i)
    gaps.emplace_back(speech[i].start - speech[i - 1].end, (speech[i].start + speech[i - 1].end) / 2);
  std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (gaps.size() < cuts) throw Error(ErrorCode::kInvalidAudio, speaker + "'s clip has too few pauses to cut");
  std::vector<double> bounds = {0.0};
  for (size_t i = 0; i < cuts; ++i) bounds.push_back(gaps[i].second);
  bounds.push_back(static_cast<double>(clip.size()) / kRate);
  std::sort(bounds.begin(), bounds.end());
  std::vector<Piece> pieces;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    Piece p{speaker, &clip, bounds[i], bounds[i + 1], {}};
    for (const auto& s : speech)
      if (s.start < p.end && s.end > p.begin) p.speech.push_back({std::max(s.start, p.begin), std::min(s.end, p.end)});
    pieces.push_back(std::move(p));
  }
  return pieces;
}

Piece whole(const std::string& speaker, const std::vector<float>& clip) {
  return Piece{speaker, &clip, 0.0, static_cast<double>(clip.size()) / kRate, speech_in_clip(clip)};
}

}  // namespace

std::vector<bench::TimeRange> speech_in_clip(const std::vector<float>& samples) {
  const size_t frames = samples.size() / kFrame;
  std::vector<double> db(frames);
  double loudest = -200;
  for (size_t f = 0; f < frames; ++f) {
    double sum = 0;
    for (size_t i = f * kFrame; i < (f + 1) * kFrame; ++i) sum += double(samples[i]) * samples[i];
    db[f] = 10 * std::log10(sum / kFrame + 1e-20);
    loudest = std::max(loudest, db[f]);
  }
  const double frame_s = static_cast<double>(kFrame) / kRate;
  std::vector<bench::TimeRange> speech;
  for (size_t f = 0; f < frames; ++f) {
    if (db[f] < loudest - kRangeDb) continue;
    const double start = static_cast<double>(f) * frame_s, end = start + frame_s;
    if (!speech.empty() && start - speech.back().end < kCloseGap)
      speech.back().end = end;
    else
      speech.push_back({start, end});
  }
  const double length = static_cast<double>(samples.size()) / kRate;
  for (auto& s : speech) {
    s.start = std::max(0.0, s.start - kPad);
    s.end = std::min(length, s.end + kPad);
  }
  return speech;
}

Conversation make_conversation(const std::filesystem::path& data_dir, const std::string& file_id) {
  const std::vector<float> jfk = load(data_dir / "jfk.wav");
  std::vector<std::vector<float>> reader;
  for (const char* id : {"0870", "0880", "0890", "0920", "0930"})
    reader.push_back(
        load(data_dir / "librivox" / (std::string("sense_and_sensibility_01_austen_64kb-") + id + ".wav")));
  const std::vector<Piece> kennedy = split_at_pauses("jfk", jfk, 2);

  // (piece, pause from the previous piece's last speech to this one's first;
  // negative: they talk over each other).
  const std::vector<std::pair<Piece, double>> script = {
      {whole("reader", reader[0]), 0.5},  // from the start of the audio
      {kennedy[0], 0.8},
      {whole("reader", reader[1]), 0.6},
      {kennedy[1], -1.0},  // JFK starts while the reader finishes
      {whole("reader", reader[2]), 0.9},
      {kennedy[2], 0.5},
      {whole("reader", reader[3]), -1.2},  // the reader interrupts
      {whole("reader", reader[4]), 1.5},   // and goes on after a pause
  };

  Conversation c;
  std::vector<double> mix;
  double previous_speech_end = 0.0;
  for (const auto& [piece, pause] : script) {
    if (piece.speech.empty()) throw Error(ErrorCode::kInvalidAudio, "a conversation piece has no speech");
    const double speech_start = previous_speech_end + pause;
    const double offset = speech_start - (piece.speech.front().start - piece.begin);  // where the piece starts
    if (offset < 0) throw Error(ErrorCode::kInternal, "conversation script places a piece before time 0");
    const auto first = static_cast<size_t>(std::llround(piece.begin * kRate));
    const auto last = std::min(piece.clip->size(), static_cast<size_t>(std::llround(piece.end * kRate)));
    const auto at = static_cast<size_t>(std::llround(offset * kRate));
    if (mix.size() < at + (last - first)) mix.resize(at + (last - first), 0.0);
    for (size_t i = first; i < last; ++i) mix[at + (i - first)] += (*piece.clip)[i];
    // Truth times on the sample grid the audio was placed on.
    const double shift = static_cast<double>(at) / kRate - static_cast<double>(first) / kRate;
    for (const auto& s : piece.speech)
      c.truth.push_back({file_id, "1", s.start + shift, s.end - s.start, piece.speaker});
    previous_speech_end = piece.speech.back().end + shift;
  }
  mix.resize(static_cast<size_t>(std::llround((previous_speech_end + 0.5) * kRate)), 0.0);
  double peak = 0;
  for (double x : mix) peak = std::max(peak, std::fabs(x));
  const double gain = peak > 0.9 ? 0.9 / peak : 1.0;
  c.samples.reserve(mix.size());
  for (double x : mix) c.samples.push_back(static_cast<float>(x * gain));
  std::sort(c.truth.begin(), c.truth.end(),
            [](const auto& a, const auto& b) { return std::tie(a.start, a.speaker) < std::tie(b.start, b.speaker); });
  return c;
}

void write_wav_16k(const std::filesystem::path& path, const std::vector<float>& samples) {
  std::string bytes;
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto u16 = [&](uint16_t v) {
    bytes.push_back(static_cast<char>(v & 0xff));
    bytes.push_back(static_cast<char>(v >> 8));
  };
  const auto data_bytes = static_cast<uint32_t>(samples.size() * 2);
  bytes += "RIFF";
  u32(36 + data_bytes);
  bytes += "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(kSampleRate);
  u32(kSampleRate * 2);
  u16(2);
  u16(16);
  bytes += "data";
  u32(data_bytes);
  for (float x : samples) {
    const float clipped = std::clamp(x, -1.0f, 1.0f);
    u16(static_cast<uint16_t>(static_cast<int16_t>(std::lrint(clipped * 32767.0f))));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw Error(ErrorCode::kIo, "cannot write " + path.string());
}

}  // namespace earshot::tools

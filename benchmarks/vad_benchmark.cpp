// Silero VAD speed on one thread: windows/s, audio seconds per second, and the
// real-time factor (compute time / audio time; lower is faster).
#include <benchmark/benchmark.h>

#include <cmath>
#include <filesystem>

#include "vad/vad.h"

namespace {

using earshot::kSampleRate;
using earshot::vad::kWindowSamples;

const std::shared_ptr<const earshot::vad::VadModel>& model() {
  static const auto m =
      earshot::vad::VadModel::load(std::filesystem::path(EARSHOT_SHARED_DIR) / "models/silero-v6.2.0-ggml.bin");
  return m;
}

// Speech-like test signal (the network's cost does not depend on the content).
std::vector<float> signal(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.3f * std::sin(0.05f * i) * std::sin(0.0007f * i);
  return x;
}

void report(benchmark::State& state, int64_t windows) {
  const double audio_s = static_cast<double>(windows) * kWindowSamples / kSampleRate;
  state.counters["windows_per_s"] = benchmark::Counter(static_cast<double>(windows), benchmark::Counter::kIsRate);
  state.counters["audio_s_per_s"] = benchmark::Counter(audio_s, benchmark::Counter::kIsRate);
  // RTF = elapsed / audio: the inverse rate of audio seconds per second.
  state.counters["rtf"] = benchmark::Counter(audio_s, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// One 512-sample window per iteration through VadSession::push.
void BM_VadSessionWindow(benchmark::State& state) {
  earshot::vad::VadSession session(model());
  const std::vector<float> x = signal(kWindowSamples * 64);
  size_t pos = 0;
  int64_t windows = 0;
  for (auto _ : state) {
    auto probs = session.push(std::span(x).subspan(pos, kWindowSamples));
    benchmark::DoNotOptimize(probs.data());
    pos = (pos + kWindowSamples) % x.size();
    windows += static_cast<int64_t>(probs.size());
  }
  report(state, windows);
}
BENCHMARK(BM_VadSessionWindow)->Unit(benchmark::kMicrosecond);

// A whole 60 s stream per iteration through SpeechDetector in 20 ms chunks (what
// a server session does), including segmentation.
void BM_SpeechDetectorStream(benchmark::State& state) {
  const std::vector<float> x = signal(60 * kSampleRate);
  int64_t windows = 0;
  for (auto _ : state) {
    earshot::vad::SpeechDetector detector(model());
    for (size_t pos = 0; pos < x.size(); pos += 320) {
      auto update = detector.push(std::span(x).subspan(pos, 320));
      windows += static_cast<int64_t>(update.probabilities.size());
    }
    windows += static_cast<int64_t>(detector.finish().probabilities.size());
  }
  report(state, windows);
}
BENCHMARK(BM_SpeechDetectorStream)->Unit(benchmark::kMillisecond);

// Cost of opening a stream (graph build + compute buffer).
void BM_VadSessionCreate(benchmark::State& state) {
  model();
  for (auto _ : state) {
    earshot::vad::VadSession session(model());
    benchmark::DoNotOptimize(&session);
  }
}
BENCHMARK(BM_VadSessionCreate)->Unit(benchmark::kMicrosecond);

}  // namespace

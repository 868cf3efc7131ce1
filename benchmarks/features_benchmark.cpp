// Log-mel front end: 30 s of audio (the encoder window) at 1 and 2 threads, and
// the 400-point real FFT alone.
#include <benchmark/benchmark.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "features/fft.h"
#include "features/mel.h"

namespace {

std::vector<float> synthetic_audio(int seconds) {
  std::vector<float> samples(static_cast<size_t>(seconds) * earshot::kSampleRate);
  uint32_t state = 12345;
  for (size_t i = 0; i < samples.size(); ++i) {
    state = state * 1664525u + 1013904223u;  // deterministic noise plus a tone
    samples[i] = 0.2f * std::sin(0.05f * static_cast<float>(i)) + ((state >> 8) / 16777216.0f - 0.5f) * 0.1f;
  }
  return samples;
}

void BM_LogMel30s(benchmark::State& state) {
  const int n_mel = static_cast<int>(state.range(1));
  const std::vector<float> samples = synthetic_audio(30);
  const std::vector<float> filters = earshot::features::mel_filter_bank(n_mel);
  for (auto _ : state) {
    auto mel = earshot::features::log_mel_spectrogram(samples, filters, n_mel,
                                                      earshot::features::kChunkSeconds * earshot::kSampleRate,
                                                      static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(mel.data.data());
  }
}
BENCHMARK(BM_LogMel30s)
    ->ArgNames({"threads", "n_mel"})
    ->Args({1, 80})
    ->Args({2, 80})
    ->Args({1, 128})
    ->Args({2, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_RealFft400Power(benchmark::State& state) {
  earshot::features::RealFft fft(400);
  const std::vector<float> frame = synthetic_audio(1);
  std::vector<float> power(fft.bins());
  earshot::features::RealFft::Workspace workspace;
  for (auto _ : state) {
    fft.power(frame.data(), power.data(), workspace);
    benchmark::DoNotOptimize(power.data());
  }
}
BENCHMARK(BM_RealFft400Power);

// Four frames per call, one SIMD lane each (what the mel uses).
void BM_RealFft400PowerBatch(benchmark::State& state) {
  earshot::features::RealFft fft(400);
  const std::vector<float> audio = synthetic_audio(1);
  std::vector<float> power(4 * fft.bins());
  const float* in[4] = {audio.data(), audio.data() + 400, audio.data() + 800, audio.data() + 1200};
  float* out[4] = {power.data(), power.data() + 201, power.data() + 402, power.data() + 603};
  earshot::features::RealFft::Workspace workspace;
  for (auto _ : state) {
    fft.power_batch(in, out, workspace);
    benchmark::DoNotOptimize(power.data());
  }
}
BENCHMARK(BM_RealFft400PowerBatch);

}  // namespace

#include "features/nemo_mel.h"

#include <algorithm>
#include <cmath>

#include "features/fft.h"

namespace earshot::features {

int nemo_frame_count(long long n_samples, const NemoMelConfig& c) {
  if (n_samples <= 0) return 0;
  return static_cast<int>(n_samples / c.hop_length) + (c.frame_count == NemoFrameCount::kLibparakeet ? 1 : 0);
}

void nemo_mel_frames(std::span<const float> x, int n_frames, const NemoMelConfig& c, std::span<const float> filters,
                     std::span<const float> window, float* out) {
  const int n_bins = c.n_fft / 2 + 1;
  const RealFft fft(c.n_fft);
  RealFft::Workspace workspace;
  const int n_window = static_cast<int>(window.size()), left = (c.n_fft - n_window) / 2;
  std::vector<float> frame(c.n_fft), power(n_bins);
  for (int f = 0; f < n_frames; ++f) {
    const int start = f * c.hop_length;
    std::fill(frame.begin(), frame.end(), 0.0f);
    for (int j = 0; j < n_window && start + left + j < static_cast<int>(x.size()); ++j)
      frame[left + j] = window[j] * x[start + left + j];
    fft.power(frame.data(), power.data(), workspace);
    for (int m = 0; m < c.n_mels; ++m) {
      const float* fb = filters.data() + static_cast<size_t>(m) * n_bins;
      double sum = 0;
      for (int k = 0; k < n_bins; ++k) sum += power[k] * fb[k];
      out[static_cast<size_t>(f) * c.n_mels + m] = static_cast<float>(std::log(sum + c.log_guard));
    }
  }
}

FrameMajorMel nemo_log_mel(std::span<const float> samples, const NemoMelConfig& c, std::span<const float> filters,
                           std::span<const float> window) {
  const int n = static_cast<int>(samples.size());
  const int pad = c.n_fft / 2;
  // Pre-emphasis, then centre padding with zeros (NeMo's constant pad).
  std::vector<float> x(n + 2 * pad, 0.0f);
  for (int i = 0; i < n; ++i) x[pad + i] = i == 0 ? samples[0] : samples[i] - c.preemph * samples[i - 1];
  FrameMajorMel mel;
  mel.n_mel = c.n_mels;
  mel.n_frames = nemo_frame_count(n, c);
  mel.data.resize(static_cast<size_t>(mel.n_frames) * c.n_mels);
  nemo_mel_frames(x, mel.n_frames, c, filters, window, mel.data.data());
  if (c.normalize_per_feature) {
    // Over NeMo's sequence length: the frames whose centre lies on audio (n / hop).
    const int valid = std::min(n / c.hop_length, mel.n_frames);
    for (int m = 0; m < c.n_mels; ++m) {
      double sum = 0, sq = 0;
      for (int f = 0; f < valid; ++f) sum += mel.data[static_cast<size_t>(f) * c.n_mels + m];
      const double mean = valid > 0 ? sum / valid : 0.0;
      for (int f = 0; f < valid; ++f) {
        const double d = mel.data[static_cast<size_t>(f) * c.n_mels + m] - mean;
        sq += d * d;
      }
      const double std_dev = valid > 1 ? std::sqrt(sq / (valid - 1.0)) : 0.0;
      for (int f = 0; f < mel.n_frames; ++f) {
        float& v = mel.data[static_cast<size_t>(f) * c.n_mels + m];
        v = static_cast<float>((v - mean) / (std_dev + 1e-5));
      }
    }
  }
  return mel;
}

}  // namespace earshot::features

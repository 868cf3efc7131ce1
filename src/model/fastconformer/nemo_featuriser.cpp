#include "model/fastconformer/nemo_featuriser.h"

#include <algorithm>
#include <cmath>

namespace earshot::fastconformer {

std::vector<float> slaney_mel_filters(int n_mels, int n_fft, int sample_rate, double f_min, double f_max) {
  const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp, step = std::log(6.4) / 27.0;
  auto hz_to_mel = [&](double f) { return f < min_log_hz ? f / f_sp : min_log_mel + std::log(f / min_log_hz) / step; };
  auto mel_to_hz = [&](double m) {
    return m < min_log_mel ? m * f_sp : min_log_hz * std::exp(step * (m - min_log_mel));
  };
  const int n_bins = n_fft / 2 + 1;
  std::vector<double> points(n_mels + 2);
  const double lo = hz_to_mel(f_min), hi = hz_to_mel(f_max);
  for (int i = 0; i < n_mels + 2; ++i) points[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));
  std::vector<float> fb(static_cast<size_t>(n_mels) * n_bins, 0.0f);
  for (int m = 0; m < n_mels; ++m) {
    const double norm = 2.0 / (points[m + 2] - points[m]);
    for (int k = 0; k < n_bins; ++k) {
      const double f = static_cast<double>(k) * sample_rate / n_fft;
      const double up = (f - points[m]) / (points[m + 1] - points[m]);
      const double down = (points[m + 2] - f) / (points[m + 2] - points[m + 1]);
      fb[static_cast<size_t>(m) * n_bins + k] = static_cast<float>(std::max(0.0, std::min(up, down)) * norm);
    }
  }
  return fb;
}

std::vector<float> symmetric_hann_window(int n) {
  std::vector<float> w;
  for (int i = 0; i < n; ++i) w.push_back(0.5f - 0.5f * std::cos(2 * M_PI * i / (n - 1.0)));
  return w;
}

}  // namespace earshot::fastconformer

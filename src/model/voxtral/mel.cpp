#include "model/voxtral/mel.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace earshot::voxtral {

LogMel::LogMel(const Hparams& hp, std::vector<float> filters, std::vector<float> window)
    : n_mels_(hp.n_mels),
      n_fft_(hp.n_fft),
      hop_(hp.hop),
      floor_(hp.log_mel_max - 8.0f),
      filters_(std::move(filters)),
      window_(std::move(window)),
      fft_(hp.n_fft) {
  if (filters_.size() != static_cast<size_t>(n_mels_) * (n_fft_ / 2 + 1) ||
      window_.size() != static_cast<size_t>(n_fft_))
    throw Error(ErrorCode::kInternal, "voxtral::LogMel: filter bank or window of the wrong size");
}

void LogMel::frame(std::span<const float> samples, int64_t first, int64_t f, float* out,
                   features::RealFft::Workspace& workspace) const {
  const int bins = n_fft_ / 2 + 1;
  std::vector<float> x(n_fft_), power(bins);
  const int64_t start = f * hop_ - n_fft_ / 2;
  for (int i = 0; i < n_fft_; ++i) {
    const int64_t at = start + i - first;
    x[i] = (at >= 0 && at < static_cast<int64_t>(samples.size()) ? samples[at] : 0.0f) * window_[i];
  }
  fft_.power(x.data(), power.data(), workspace);
  for (int m = 0; m < n_mels_; ++m) {
    const float* w = filters_.data() + static_cast<size_t>(m) * bins;
    double sum = 0;
    for (int k = 0; k < bins; ++k) sum += static_cast<double>(w[k]) * power[k];
    const float log = std::log10(std::max(static_cast<float>(sum), 1e-10f));
    out[m] = (std::max(log, floor_) + 4.0f) / 4.0f;
  }
}

}  // namespace earshot::voxtral

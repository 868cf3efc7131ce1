// What the NeMo feature tests share: a toy filter bank, NeMo's 400-sample Hann
// window and noise-like samples, all reproducible.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "features/nemo_mel.h"

namespace earshot::features::testing {

// [n_mels][n_fft/2 + 1], every bin weighted.
inline std::vector<float> toy_filters(const NemoMelConfig& c) {
  std::vector<float> filters(static_cast<size_t>(c.n_mels) * (c.n_fft / 2 + 1));
  for (size_t i = 0; i < filters.size(); ++i) filters[i] = 0.01f * static_cast<float>((i * 7) % 13);
  return filters;
}

inline std::vector<float> hann_400() {
  std::vector<float> window(400);
  for (int i = 0; i < 400; ++i) window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * i / 399.0));
  return window;
}

inline std::vector<float> noise(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace earshot::features::testing

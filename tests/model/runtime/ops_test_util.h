// What the CPU op tests (openblas_ops_test, gemv_ops_test) share.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace earshot::runtime::testing {

// n values from N(0, scale^2), reproducible from the seed.
inline std::vector<float> normal_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace earshot::runtime::testing

#include "features/fft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "common/error.h"

namespace earshot::features {
namespace {

// Textbook DFT in double precision: the reference every size must match.
std::vector<std::complex<double>> naive_dft(const std::vector<float>& x) {
  const int n = static_cast<int>(x.size());
  std::vector<std::complex<double>> out(n / 2 + 1);
  for (int k = 0; k <= n / 2; ++k) {
    std::complex<double> acc = 0;
    for (int t = 0; t < n; ++t) {
      const double angle = -2.0 * std::numbers::pi * static_cast<double>((static_cast<long long>(k) * t) % n) / n;
      acc += static_cast<double>(x[t]) * std::complex<double>(std::cos(angle), std::sin(angle));
    }
    out[k] = acc;
  }
  return out;
}

class RealFftSizes : public ::testing::TestWithParam<int> {};

TEST_P(RealFftSizes, MatchesNaiveDft) {
  const int n = GetParam();
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);

  RealFft fft(n);
  ASSERT_EQ(fft.bins(), n / 2 + 1);
  std::vector<std::complex<float>> spectrum(fft.bins());
  RealFft::Workspace workspace;
  fft.transform(x.data(), spectrum.data(), workspace);
  std::vector<float> power(fft.bins());
  fft.power(x.data(), power.data(), workspace);

  const auto expected = naive_dft(x);
  for (int k = 0; k <= n / 2; ++k) {
    EXPECT_NEAR(spectrum[k].real(), expected[k].real(), 2e-5 * n) << "n=" << n << " bin " << k;
    EXPECT_NEAR(spectrum[k].imag(), expected[k].imag(), 2e-5 * n) << "n=" << n << " bin " << k;
    EXPECT_NEAR(power[k], std::norm(expected[k]), 1e-4 * n * (1 + std::norm(expected[k]))) << "bin " << k;
  }
}

// 400 is Whisper's size (radices 4, 2, 5, 5); the others exercise radix 2, 3
// and the generic path (7, 11, 13).
INSTANTIATE_TEST_SUITE_P(Sizes, RealFftSizes, ::testing::Values(2, 4, 6, 8, 10, 14, 16, 22, 26, 30, 64, 90, 400, 512));

TEST(RealFft, PureToneLandsInItsBin) {
  const int n = 400;
  std::vector<float> x(n);
  for (int t = 0; t < n; ++t) x[t] = static_cast<float>(std::cos(2.0 * std::numbers::pi * 25 * t / n));
  RealFft fft(n);
  std::vector<float> power(fft.bins());
  RealFft::Workspace workspace;
  fft.power(x.data(), power.data(), workspace);
  // A unit cosine at bin 25 has |X[25]| = n / 2 and nothing elsewhere.
  for (int k = 0; k < fft.bins(); ++k) {
    const double expected = k == 25 ? (n / 2.0) * (n / 2.0) : 0.0;
    EXPECT_NEAR(power[k], expected, 1e-2) << "bin " << k;
  }
}

TEST_P(RealFftSizes, BatchEqualsOneAtATime) {
  const int n = GetParam();
  std::mt19937 rng(n + 1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  RealFft fft(n);
  std::vector<std::vector<float>> signals(RealFft::kBatch, std::vector<float>(n));
  for (auto& s : signals)
    for (float& v : s) v = dist(rng);
  std::vector<std::vector<float>> batch(RealFft::kBatch, std::vector<float>(fft.bins()));
  const float* in[RealFft::kBatch];
  float* out[RealFft::kBatch];
  for (int b = 0; b < RealFft::kBatch; ++b) {
    in[b] = signals[b].data();
    out[b] = batch[b].data();
  }
  RealFft::Workspace workspace;
  fft.power_batch(in, out, workspace);
  for (int b = 0; b < RealFft::kBatch; ++b) {
    std::vector<float> single(fft.bins());
    fft.power(signals[b].data(), single.data(), workspace);
    // Same operations lane by lane: bit-identical, so the mel does not depend on batching.
    EXPECT_EQ(batch[b], single) << "n=" << n << " lane " << b;
  }
}

TEST(RealFft, RejectsOddOrTinySizes) {
  EXPECT_THROW(RealFft(0), Error);
  EXPECT_THROW(RealFft(401), Error);
  EXPECT_THROW(RealFft(-4), Error);
}

}  // namespace
}  // namespace earshot::features

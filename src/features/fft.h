// Power spectrum of a real signal via a mixed-radix complex FFT of half the
// length (radix 2/4/5 butterflies, generic fallback) with precomputed twiddles.
// Built once per size and immutable, so one instance is shared across threads.
#pragma once

#include <complex>
#include <vector>

namespace earshot::features {

class RealFft {
 public:
  // n must be even and positive; sizes whose half has only factors 2, 3, 4, 5
  // are fastest (400 -> 200 = 4 * 2 * 5 * 5), others use a generic radix.
  explicit RealFft(int n);

  int size() const { return n_; }
  int bins() const { return n_ / 2 + 1; }

  // spectrum[k] = sum_t in[t] * exp(-2 pi i k t / n) for k in [0, n/2]. scratch
  // is grown to at least n values (one per thread); spectrum must not overlap its first n.
  void transform(const float* in, std::complex<float>* spectrum, std::vector<std::complex<float>>& scratch) const;
  // |spectrum[k]|^2 for k in [0, n/2].
  void power(const float* in, float* power, std::vector<std::complex<float>>& scratch) const;

 private:
  struct Stage {
    int radix = 0;
    int sub_len = 0;                               // n / radix of this stage's transform length
    int stride = 0;                                // distance between the interleaved transforms of this stage
    std::vector<std::complex<float>> twiddles;     // [sub_len][radix]: w_len^(p*j)
    std::vector<std::complex<float>> radix_roots;  // w_radix^j, for the generic butterfly
  };

  int n_ = 0;
  int half_ = 0;
  std::vector<Stage> stages_;
  std::vector<std::complex<float>> unpack_twiddles_;  // w_n^k, k in [0, n/2]
};

}  // namespace earshot::features

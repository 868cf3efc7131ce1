// Power spectrum of a real signal via a mixed-radix complex FFT of half the
// length (radix 2/3/4/5 butterflies, generic fallback) with precomputed
// twiddles. The same code runs on one signal or, with SIMD lanes, on
// kBatch signals at once. Built once per size and immutable: one instance is
// shared across threads, each with its own Workspace.
#pragma once

#include <complex>
#include <memory>
#include <vector>

namespace earshot::features {

class RealFft {
 public:
  static constexpr int kBatch = 4;  // signals per power_batch() call

  // Per-thread buffers, grown on first use.
  class Workspace {
   public:
    Workspace();
    ~Workspace();
    Workspace(Workspace&&) noexcept;
    Workspace& operator=(Workspace&&) noexcept;

   private:
    friend class RealFft;
    struct Buffers;
    std::unique_ptr<Buffers> buffers_;
  };

  // n must be even and positive; sizes whose half has only factors 2, 3, 5 are
  // fastest (400 -> 200 = 4 * 2 * 5 * 5), others use a generic radix.
  explicit RealFft(int n);

  int size() const { return n_; }
  int bins() const { return n_ / 2 + 1; }

  // spectrum[k] = sum_t in[t] * exp(-2 pi i k t / n) for k in [0, n/2].
  void transform(const float* in, std::complex<float>* spectrum, Workspace& workspace) const;
  // |spectrum[k]|^2 for k in [0, n/2].
  void power(const float* in, float* power, Workspace& workspace) const;
  // power() of kBatch signals in[b] into power[b], one SIMD lane per signal.
  void power_batch(const float* const* in, float* const* power, Workspace& workspace) const;

  struct Plan;  // stages and twiddles; an implementation detail defined in fft.cpp

 private:
  int n_ = 0;
  std::shared_ptr<const Plan> plan_;
};

}  // namespace earshot::features

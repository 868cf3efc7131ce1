#include "features/fft.h"

#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "common/error.h"

namespace earshot::features {
namespace {

using Complex = std::complex<float>;

// exp(-2 pi i num / den), computed in double so every twiddle is correctly rounded.
Complex root_of_unity(long long num, long long den) {
  const double angle = -2.0 * std::numbers::pi * static_cast<double>(num % den) / static_cast<double>(den);
  return {static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle))};
}

Complex times_minus_i(Complex z) { return {z.imag(), -z.real()}; }

// Plain complex product: std::complex's operator* checks for NaN/inf through a
// library call (C Annex G), which makes it several times slower here.
Complex mul(Complex a, Complex b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

std::vector<int> factorize(int n) {
  std::vector<int> radices;
  while (n % 4 == 0) {
    radices.push_back(4);
    n /= 4;
  }
  for (int p = 2; n > 1; ++p) {
    while (n % p == 0) {
      radices.push_back(p);
      n /= p;
    }
  }
  return radices;
}

}  // namespace

RealFft::RealFft(int n) : n_(n), half_(n / 2) {
  if (n < 2 || n % 2 != 0) {
    throw Error(ErrorCode::kInvalidArgument, "RealFft size must be even and >= 2, got " + std::to_string(n));
  }
  // Stockham decimation in frequency: each stage splits a transform of length
  // `len` into `radix` interleaved transforms of length len / radix, writing
  // its output so that the final result lands in natural order.
  int len = half_;
  int stride = 1;
  for (int radix : factorize(half_)) {
    Stage stage;
    stage.radix = radix;
    stage.sub_len = len / radix;
    stage.stride = stride;
    stage.twiddles.resize(static_cast<size_t>(stage.sub_len) * radix);
    for (int p = 0; p < stage.sub_len; ++p) {
      for (int j = 0; j < radix; ++j) stage.twiddles[static_cast<size_t>(p) * radix + j] = root_of_unity(p * j, len);
    }
    stage.radix_roots.resize(radix);
    for (int j = 0; j < radix; ++j) stage.radix_roots[j] = root_of_unity(j, radix);
    stages_.push_back(std::move(stage));
    len /= radix;
    stride *= radix;
  }
  unpack_twiddles_.resize(half_ + 1);
  for (int k = 0; k <= half_; ++k) unpack_twiddles_[k] = root_of_unity(k, n_);
}

namespace {

// Constants of the radix-3 and radix-5 butterflies.
const float kCos3 = static_cast<float>(std::cos(2.0 * std::numbers::pi / 3.0));
const float kSin3 = static_cast<float>(std::sin(2.0 * std::numbers::pi / 3.0));
const float kCos5a = static_cast<float>(std::cos(2.0 * std::numbers::pi / 5.0));
const float kCos5b = static_cast<float>(std::cos(4.0 * std::numbers::pi / 5.0));
const float kSin5a = static_cast<float>(std::sin(2.0 * std::numbers::pi / 5.0));
const float kSin5b = static_cast<float>(std::sin(4.0 * std::numbers::pi / 5.0));

// Output j of a butterfly times its twiddle; the first butterfly of every stage
// (p = 0) has all twiddles equal to 1 and skips the products.
template <bool kTwiddled>
Complex twiddle(Complex z, const Complex* w, int j) {
  if constexpr (kTwiddled) {
    return mul(z, w[j]);
  } else {
    (void)w;
    (void)j;
    return z;
  }
}

// The `stride` butterflies of one stage that share twiddle row w: inputs
// a[q + k * in_step], outputs out[q + j * stride].
template <int kRadix, bool kTwiddled>
void butterflies_of(int radix, int stride, int in_step, const Complex* a, Complex* out, const Complex* w,
                    const Complex* radix_roots, std::vector<Complex>& generic_in) {
  const int s = stride;
  for (int q = 0; q < s; ++q, ++a, ++out) {
    switch (kRadix) {
      case 2: {
        const Complex a0 = a[0], a1 = a[in_step];
        out[0] = a0 + a1;
        out[s] = twiddle<kTwiddled>(a0 - a1, w, 1);
        break;
      }
      case 3: {
        const Complex a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step];
        const Complex sum = a1 + a2;
        const Complex mid = a0 + kCos3 * sum;
        const Complex rot = times_minus_i(kSin3 * (a1 - a2));
        out[0] = a0 + sum;
        out[s] = twiddle<kTwiddled>(mid + rot, w, 1);
        out[2 * s] = twiddle<kTwiddled>(mid - rot, w, 2);
        break;
      }
      case 4: {
        const Complex a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step];
        const Complex t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = times_minus_i(a1 - a3);
        out[0] = t0 + t2;
        out[s] = twiddle<kTwiddled>(t1 + t3, w, 1);
        out[2 * s] = twiddle<kTwiddled>(t0 - t2, w, 2);
        out[3 * s] = twiddle<kTwiddled>(t1 - t3, w, 3);
        break;
      }
      case 5: {
        const Complex a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step], a4 = a[4 * in_step];
        const Complex b1 = a1 + a4, b2 = a2 + a3, d1 = a1 - a4, d2 = a2 - a3;
        const Complex m1 = a0 + kCos5a * b1 + kCos5b * b2;
        const Complex m2 = a0 + kCos5b * b1 + kCos5a * b2;
        const Complex r1 = times_minus_i(kSin5a * d1 + kSin5b * d2);
        const Complex r2 = times_minus_i(kSin5b * d1 - kSin5a * d2);
        out[0] = a0 + b1 + b2;
        out[s] = twiddle<kTwiddled>(m1 + r1, w, 1);
        out[2 * s] = twiddle<kTwiddled>(m2 + r2, w, 2);
        out[3 * s] = twiddle<kTwiddled>(m2 - r2, w, 3);
        out[4 * s] = twiddle<kTwiddled>(m1 - r1, w, 4);
        break;
      }
      default: {
        generic_in.resize(radix);
        for (int k = 0; k < radix; ++k) generic_in[k] = a[k * in_step];
        for (int j = 0; j < radix; ++j) {
          Complex acc = 0;
          for (int k = 0; k < radix; ++k) acc += mul(generic_in[k], radix_roots[(j * k) % radix]);
          out[j * s] = twiddle<kTwiddled>(acc, w, j);
        }
        break;
      }
    }
  }
}

template <bool kTwiddled>
void butterflies(int radix, int stride, int in_step, const Complex* a, Complex* out, const Complex* w,
                 const Complex* radix_roots, std::vector<Complex>& generic_in) {
  // Dispatch once per row so the radix is a constant inside the loop.
  switch (radix) {
    case 2: return butterflies_of<2, kTwiddled>(radix, stride, in_step, a, out, w, radix_roots, generic_in);
    case 3: return butterflies_of<3, kTwiddled>(radix, stride, in_step, a, out, w, radix_roots, generic_in);
    case 4: return butterflies_of<4, kTwiddled>(radix, stride, in_step, a, out, w, radix_roots, generic_in);
    case 5: return butterflies_of<5, kTwiddled>(radix, stride, in_step, a, out, w, radix_roots, generic_in);
    default: return butterflies_of<0, kTwiddled>(radix, stride, in_step, a, out, w, radix_roots, generic_in);
  }
}

}  // namespace

void RealFft::transform(const float* in, Complex* spectrum, std::vector<Complex>& scratch) const {
  const int h = half_;
  if (scratch.size() < 2 * static_cast<size_t>(h)) scratch.resize(2 * static_cast<size_t>(h));
  Complex* x = scratch.data();
  Complex* y = scratch.data() + h;
  // Even samples as real parts, odd samples as imaginary parts: one complex FFT
  // of half the length gives both half-spectra.
  for (int t = 0; t < h; ++t) x[t] = Complex(in[2 * t], in[2 * t + 1]);

  std::vector<Complex> generic_in;
  for (const Stage& stage : stages_) {
    const int r = stage.radix;
    const int m = stage.sub_len;
    const int s = stage.stride;
    for (int p = 0; p < m; ++p) {
      const Complex* w = stage.twiddles.data() + static_cast<size_t>(p) * r;
      if (p == 0) {
        butterflies<false>(r, s, s * m, x, y, w, stage.radix_roots.data(), generic_in);
      } else {
        butterflies<true>(r, s, s * m, x + s * p, y + s * r * p, w, stage.radix_roots.data(), generic_in);
      }
    }
    std::swap(x, y);
  }

  // Untangle: Z[k] = E[k] + i O[k] where E, O are the spectra of the even and
  // odd samples; X[k] = E[k] + w_n^k O[k].
  for (int k = 0; k <= h; ++k) {
    const Complex zk = x[k % h];
    const Complex zc = std::conj(x[(h - k) % h]);
    const Complex even = 0.5f * (zk + zc);
    const Complex odd = times_minus_i(0.5f * (zk - zc));
    spectrum[k] = even + mul(unpack_twiddles_[k], odd);
  }
}

void RealFft::power(const float* in, float* power, std::vector<Complex>& scratch) const {
  // The spectrum lives after transform()'s two work buffers in the same scratch.
  const size_t h = static_cast<size_t>(half_);
  if (scratch.size() < 3 * h + 1) scratch.resize(3 * h + 1);
  Complex* spectrum = scratch.data() + 2 * h;
  transform(in, spectrum, scratch);
  for (size_t k = 0; k <= h; ++k)
    power[k] = spectrum[k].real() * spectrum[k].real() + spectrum[k].imag() * spectrum[k].imag();
}

}  // namespace earshot::features

#include "features/fft.h"

#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "common/error.h"

namespace earshot::features {
namespace {

// kBatch floats processed as one value (GCC/Clang vector extension): the
// arithmetic below is written once and runs on float or on 4 signals at once.
typedef float Float4 __attribute__((vector_size(4 * sizeof(float))));
static_assert(RealFft::kBatch == 4);

template <typename Lane>
struct Cx {
  Lane re;
  Lane im;
};

template <typename Lane>
Cx<Lane> operator+(Cx<Lane> a, Cx<Lane> b) {
  return {a.re + b.re, a.im + b.im};
}
template <typename Lane>
Cx<Lane> operator-(Cx<Lane> a, Cx<Lane> b) {
  return {a.re - b.re, a.im - b.im};
}
template <typename Lane>
Cx<Lane> operator*(float c, Cx<Lane> a) {
  return {c * a.re, c * a.im};
}
template <typename Lane>
Cx<Lane> times_minus_i(Cx<Lane> z) {
  return {z.im, -z.re};
}
// Plain complex product with a constant (std::complex's operator* goes through
// a NaN/inf-checking library call, several times slower).
template <typename Lane>
Cx<Lane> mul(Cx<Lane> a, std::complex<float> w) {
  return {a.re * w.real() - a.im * w.imag(), a.re * w.imag() + a.im * w.real()};
}

// exp(-2 pi i num / den), computed in double so every twiddle is correctly rounded.
std::complex<float> root_of_unity(long long num, long long den) {
  const double angle = -2.0 * std::numbers::pi * static_cast<double>(num % den) / static_cast<double>(den);
  return {static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle))};
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

// Constants of the radix-3 and radix-5 butterflies.
const float kCos3 = static_cast<float>(std::cos(2.0 * std::numbers::pi / 3.0));
const float kSin3 = static_cast<float>(std::sin(2.0 * std::numbers::pi / 3.0));
const float kCos5a = static_cast<float>(std::cos(2.0 * std::numbers::pi / 5.0));
const float kCos5b = static_cast<float>(std::cos(4.0 * std::numbers::pi / 5.0));
const float kSin5a = static_cast<float>(std::sin(2.0 * std::numbers::pi / 5.0));
const float kSin5b = static_cast<float>(std::sin(4.0 * std::numbers::pi / 5.0));

// Output j of a butterfly times its twiddle; the first butterfly of every stage
// (p = 0) has all twiddles equal to 1 and skips the products.
template <bool kTwiddled, typename Lane>
Cx<Lane> twiddle(Cx<Lane> z, const std::complex<float>* w, int j) {
  if constexpr (kTwiddled) {
    return mul(z, w[j]);
  } else {
    (void)w;
    (void)j;
    return z;
  }
}

}  // namespace

struct RealFft::Plan {
  struct Stage {
    int radix = 0;
    int sub_len = 0;                               // len / radix for this stage's transform length len
    int stride = 0;                                // distance between the interleaved transforms of this stage
    std::vector<std::complex<float>> twiddles;     // [sub_len][radix]: w_len^(p*j)
    std::vector<std::complex<float>> radix_roots;  // w_radix^j, for the generic butterfly
  };
  int half = 0;
  std::vector<Stage> stages;
  std::vector<std::complex<float>> unpack_twiddles;  // w_n^k, k in [0, n/2]
};

struct RealFft::Workspace::Buffers {
  std::vector<Cx<float>> scalar;
  std::vector<Cx<Float4>> batch;
  std::vector<Cx<float>> generic_scalar;
  std::vector<Cx<Float4>> generic_batch;
  std::vector<std::complex<float>> spectrum;
};

RealFft::Workspace::Workspace() : buffers_(std::make_unique<Buffers>()) {}
RealFft::Workspace::~Workspace() = default;
RealFft::Workspace::Workspace(Workspace&&) noexcept = default;
RealFft::Workspace& RealFft::Workspace::operator=(Workspace&&) noexcept = default;

namespace {

using Plan = RealFft::Plan;

// The `stride` butterflies of one stage that share twiddle row w: inputs
// a[q + k * in_step], outputs out[q + j * stride].
template <int kRadix, bool kTwiddled, typename Lane>
void butterflies_of(const Plan::Stage& stage, int in_step, const Cx<Lane>* a, Cx<Lane>* out,
                    const std::complex<float>* w, std::vector<Cx<Lane>>& generic_in) {
  using C = Cx<Lane>;
  const int s = stage.stride;
  for (int q = 0; q < s; ++q, ++a, ++out) {
    if constexpr (kRadix == 2) {
      const C a0 = a[0], a1 = a[in_step];
      out[0] = a0 + a1;
      out[s] = twiddle<kTwiddled>(a0 - a1, w, 1);
    } else if constexpr (kRadix == 3) {
      const C a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step];
      const C sum = a1 + a2;
      const C mid = a0 + kCos3 * sum;
      const C rot = times_minus_i(kSin3 * (a1 - a2));
      out[0] = a0 + sum;
      out[s] = twiddle<kTwiddled>(mid + rot, w, 1);
      out[2 * s] = twiddle<kTwiddled>(mid - rot, w, 2);
    } else if constexpr (kRadix == 4) {
      const C a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step];
      const C t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = times_minus_i(a1 - a3);
      out[0] = t0 + t2;
      out[s] = twiddle<kTwiddled>(t1 + t3, w, 1);
      out[2 * s] = twiddle<kTwiddled>(t0 - t2, w, 2);
      out[3 * s] = twiddle<kTwiddled>(t1 - t3, w, 3);
    } else if constexpr (kRadix == 5) {
      const C a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step], a4 = a[4 * in_step];
      const C b1 = a1 + a4, b2 = a2 + a3, d1 = a1 - a4, d2 = a2 - a3;
      const C m1 = a0 + kCos5a * b1 + kCos5b * b2;
      const C m2 = a0 + kCos5b * b1 + kCos5a * b2;
      const C r1 = times_minus_i(kSin5a * d1 + kSin5b * d2);
      const C r2 = times_minus_i(kSin5b * d1 - kSin5a * d2);
      out[0] = a0 + b1 + b2;
      out[s] = twiddle<kTwiddled>(m1 + r1, w, 1);
      out[2 * s] = twiddle<kTwiddled>(m2 + r2, w, 2);
      out[3 * s] = twiddle<kTwiddled>(m2 - r2, w, 3);
      out[4 * s] = twiddle<kTwiddled>(m1 - r1, w, 4);
    } else {
      const int r = stage.radix;
      generic_in.resize(r);
      for (int k = 0; k < r; ++k) generic_in[k] = a[k * in_step];
      for (int j = 0; j < r; ++j) {
        C acc = 0.0f * generic_in[0];
        for (int k = 0; k < r; ++k) acc = acc + mul(generic_in[k], stage.radix_roots[(j * k) % r]);
        out[j * s] = twiddle<kTwiddled>(acc, w, j);
      }
    }
  }
}

template <bool kTwiddled, typename Lane>
void butterflies(const Plan::Stage& stage, int in_step, const Cx<Lane>* a, Cx<Lane>* out, const std::complex<float>* w,
                 std::vector<Cx<Lane>>& generic_in) {
  // Dispatch once per row so the radix is a constant inside the loop.
  switch (stage.radix) {
    case 2: return butterflies_of<2, kTwiddled>(stage, in_step, a, out, w, generic_in);
    case 3: return butterflies_of<3, kTwiddled>(stage, in_step, a, out, w, generic_in);
    case 4: return butterflies_of<4, kTwiddled>(stage, in_step, a, out, w, generic_in);
    case 5: return butterflies_of<5, kTwiddled>(stage, in_step, a, out, w, generic_in);
    default: return butterflies_of<0, kTwiddled>(stage, in_step, a, out, w, generic_in);
  }
}

// Complex FFT of half the length in place of buffer[0, h) (using [h, 2h) as
// the other half of the Stockham ping-pong), then the untangling into the
// n/2 + 1 bins of the real signal, handed to emit(k, value).
template <typename Lane, typename Emit>
void real_fft(const Plan& plan, std::vector<Cx<Lane>>& buffer, std::vector<Cx<Lane>>& generic_in, Emit emit) {
  const int h = plan.half;
  Cx<Lane>* x = buffer.data();
  Cx<Lane>* y = buffer.data() + h;
  for (const Plan::Stage& stage : plan.stages) {
    const int r = stage.radix;
    const int m = stage.sub_len;
    const int s = stage.stride;
    for (int p = 0; p < m; ++p) {
      const std::complex<float>* w = stage.twiddles.data() + static_cast<size_t>(p) * r;
      if (p == 0) {
        butterflies<false>(stage, s * m, x, y, w, generic_in);
      } else {
        butterflies<true>(stage, s * m, x + s * p, y + s * r * p, w, generic_in);
      }
    }
    std::swap(x, y);
  }
  // Untangle: Z[k] = E[k] + i O[k] where E, O are the spectra of the even and
  // odd samples; X[k] = E[k] + w_n^k O[k].
  for (int k = 0; k <= h; ++k) {
    const Cx<Lane> zk = x[k % h];
    const Cx<Lane> zc_conj = x[(h - k) % h];
    const Cx<Lane> zc = {zc_conj.re, -zc_conj.im};
    const Cx<Lane> even = 0.5f * (zk + zc);
    const Cx<Lane> odd = times_minus_i(0.5f * (zk - zc));
    emit(k, even + mul(odd, plan.unpack_twiddles[k]));
  }
}

}  // namespace

RealFft::RealFft(int n) : n_(n) {
  if (n < 2 || n % 2 != 0) {
    throw Error(ErrorCode::kInvalidArgument, "RealFft size must be even and >= 2, got " + std::to_string(n));
  }
  auto plan = std::make_shared<Plan>();
  plan->half = n / 2;
  // Stockham decimation in frequency: each stage splits a transform of length
  // `len` into `radix` interleaved transforms of length len / radix, writing
  // its output so that the final result lands in natural order.
  int len = plan->half;
  int stride = 1;
  for (int radix : factorize(plan->half)) {
    Plan::Stage stage;
    stage.radix = radix;
    stage.sub_len = len / radix;
    stage.stride = stride;
    stage.twiddles.resize(static_cast<size_t>(stage.sub_len) * radix);
    for (int p = 0; p < stage.sub_len; ++p) {
      for (int j = 0; j < radix; ++j) stage.twiddles[static_cast<size_t>(p) * radix + j] = root_of_unity(p * j, len);
    }
    stage.radix_roots.resize(radix);
    for (int j = 0; j < radix; ++j) stage.radix_roots[j] = root_of_unity(j, radix);
    plan->stages.push_back(std::move(stage));
    len /= radix;
    stride *= radix;
  }
  plan->unpack_twiddles.resize(plan->half + 1);
  for (int k = 0; k <= plan->half; ++k) plan->unpack_twiddles[k] = root_of_unity(k, n);
  plan_ = std::move(plan);
}

void RealFft::transform(const float* in, std::complex<float>* spectrum, Workspace& workspace) const {
  const int h = plan_->half;
  auto& buffer = workspace.buffers_->scalar;
  buffer.resize(2 * static_cast<size_t>(h));
  // Even samples as real parts, odd samples as imaginary parts: one complex FFT
  // of half the length gives both half-spectra.
  for (int t = 0; t < h; ++t) buffer[t] = {in[2 * t], in[2 * t + 1]};
  real_fft(*plan_, buffer, workspace.buffers_->generic_scalar, [&](int k, Cx<float> v) { spectrum[k] = {v.re, v.im}; });
}

void RealFft::power(const float* in, float* power, Workspace& workspace) const {
  const int h = plan_->half;
  auto& buffer = workspace.buffers_->scalar;
  buffer.resize(2 * static_cast<size_t>(h));
  for (int t = 0; t < h; ++t) buffer[t] = {in[2 * t], in[2 * t + 1]};
  real_fft(*plan_, buffer, workspace.buffers_->generic_scalar,
           [&](int k, Cx<float> v) { power[k] = v.re * v.re + v.im * v.im; });
}

void RealFft::power_batch(const float* const* in, float* const* power, Workspace& workspace) const {
  const int h = plan_->half;
  auto& buffer = workspace.buffers_->batch;
  buffer.resize(2 * static_cast<size_t>(h));
  for (int t = 0; t < h; ++t) {
    buffer[t].re = Float4{in[0][2 * t], in[1][2 * t], in[2][2 * t], in[3][2 * t]};
    buffer[t].im = Float4{in[0][2 * t + 1], in[1][2 * t + 1], in[2][2 * t + 1], in[3][2 * t + 1]};
  }
  real_fft(*plan_, buffer, workspace.buffers_->generic_batch, [&](int k, Cx<Float4> v) {
    const Float4 p = v.re * v.re + v.im * v.im;
    for (int b = 0; b < kBatch; ++b) power[b][k] = p[b];
  });
}

}  // namespace earshot::features

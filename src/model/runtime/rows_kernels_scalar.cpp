// The scalar tiles of runtime::rows_mul_mat (rows_kernels.h): any x86-64 CPU, and
// the reference the vector paths are tested beside. Each output sums k in order;
// a Q8_0 block's integer dot product is exact, then scaled in f32.
#include <ggml.h>

#include <cstring>
#include <utility>

#include "model/runtime/rows_kernels.h"

namespace earshot::runtime::rows {
namespace {

constexpr int64_t kQ8Block = 34;

template <typename T>
float value(const char* row, int64_t k) {
  if constexpr (sizeof(T) == 2) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return ggml_fp16_to_fp32(h);
  } else {
    float f;
    std::memcpy(&f, row + 4 * k, 4);
    return f;
  }
}

template <typename T>
struct FloatScalar {
  template <int R, int J>
  static void run(const Tile& t) {
    for (int r = 0; r < R; ++r) {
      const char* w = t.w + r * t.ldw;
      for (int j = 0; j < J; ++j) {
        const float* x = t.x + j * t.ldx;
        float sum = 0.0f;
        for (int64_t k = 0; k < t.K; ++k) sum += value<T>(w, k) * x[k];
        if (t.bias) sum += t.bias[r];
        t.out[j * t.ldo + r] = sum;
      }
    }
  }
};

struct Q8Scalar {
  template <int R, int J>
  static void run(const Tile& t) {
    const int64_t nb = t.K / 32;
    for (int r = 0; r < R; ++r) {
      const char* w = t.w + r * t.ldw;
      for (int j = 0; j < J; ++j) {
        const auto* q = reinterpret_cast<const int8_t*>(t.q.bytes + j * t.q.ldq);
        const float* s = t.q.scales + j * t.q.lds;
        float sum = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const char* blk = w + b * kQ8Block;
          uint16_t h;
          std::memcpy(&h, blk, 2);
          int32_t dot = 0;
          for (int k = 0; k < 32; ++k) dot += static_cast<int32_t>(static_cast<int8_t>(blk[2 + k])) * q[b * 32 + k];
          sum += static_cast<float>(dot) * (ggml_fp16_to_fp32(h) * s[b * 8]);
        }
        if (t.bias) sum += t.bias[r];
        t.out[j * t.ldo + r] = sum;
      }
    }
  }
};

// Per super-block: the exact integer sums sum_s sc_s * (q_w . q_x)_s and
// sum_s m_s * sum(q_x)_s, then acc += isum * (d_w * d_x), mins += msum * (dmin_w * d_x);
// the output is acc - mins (the vector paths: the same per lane, then reduced).
struct Q4KScalar {
  template <int R, int J>
  static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    for (int r = 0; r < R; ++r) {
      const char* w = t.w + r * t.ldw;
      for (int j = 0; j < J; ++j) {
        const auto* q = reinterpret_cast<const int8_t*>(t.q.bytes + j * t.q.ldq);
        const float* dx = t.q.scales + j * t.q.lds;
        const int32_t* sums = t.q.sums + j * t.q.ldb;
        float acc = 0.0f, mins = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const auto* blk = reinterpret_cast<const uint8_t*>(w + b * kQ4KBlock);
          uint16_t hd, hm;
          std::memcpy(&hd, blk, 2);
          std::memcpy(&hm, blk + 2, 2);
          uint8_t sc[8], m[8];
          q4k_scales_mins(blk + 4, sc, m);
          int32_t isum = 0, msum = 0;
          for (int c = 0; c < 4; ++c) {
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 32; ++l) {
              const uint8_t v = blk[16 + 32 * c + l];
              lo += (v & 0xF) * q[b * 256 + 64 * c + l];
              hi += (v >> 4) * q[b * 256 + 64 * c + 32 + l];
            }
            isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
          }
          for (int sb = 0; sb < 8; ++sb) msum += m[sb] * sums[b * 8 + sb];
          acc += static_cast<float>(isum) * (ggml_fp16_to_fp32(hd) * dx[b]);
          mins += static_cast<float>(msum) * (ggml_fp16_to_fp32(hm) * dx[b]);
        }
        float v = acc - mins;
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// Per super-block: isum = sum over its 16 groups of 16 of scale_g * sum (q_w - 32) * q_x,
// exact in int32, then acc += isum * (d_w * d_x) (the vector paths: the same per lane,
// then reduced).
struct Q6KScalar {
  template <int R, int J>
  static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    for (int r = 0; r < R; ++r) {
      const char* w = t.w + r * t.ldw;
      for (int j = 0; j < J; ++j) {
        const auto* q = reinterpret_cast<const int8_t*>(t.q.bytes + j * t.q.ldq);
        const float* dx = t.q.scales + j * t.q.lds;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const auto* blk = reinterpret_cast<const uint8_t*>(w + b * kQ6KBlock);
          const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6KScales);
          uint16_t hd;
          std::memcpy(&hd, blk + kQ6KD, 2);
          int32_t isum = 0;
          for (int n = 0; n < 2; ++n) {
            const uint8_t* ql = blk + 64 * n;
            const uint8_t* qh = blk + kQ6KHigh + 32 * n;
            const int8_t* x = q + b * 256 + 128 * n;
            int32_t g[8] = {};
            for (int l = 0; l < 32; ++l) {
              const int is = l / 16;
              g[is + 0] += (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32) * x[l];
              g[is + 2] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * x[l + 32];
              g[is + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * x[l + 64];
              g[is + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * x[l + 96];
            }
            for (int k = 0; k < 8; ++k) isum += sc[8 * n + k] * g[k];
          }
          acc += static_cast<float>(isum) * (ggml_fp16_to_fp32(hd) * dx[b]);
        }
        float v = acc;
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

template <typename Kernel>
Tiles make_tiles() {
  Tiles t;
  t.max_r = 1, t.max_j = 1;
  t.fn[0][0] = &Kernel::template run<1, 1>;
  return t;
}

}  // namespace

const Tiles& tiles_scalar(WeightKind kind) {
  static const Tiles f32 = make_tiles<FloatScalar<float>>();
  static const Tiles f16 = make_tiles<FloatScalar<uint16_t>>();
  static const Tiles q8 = make_tiles<Q8Scalar>();
  static const Tiles q4k = make_tiles<Q4KScalar>();
  static const Tiles q6k = make_tiles<Q6KScalar>();
  switch (kind) {
    case WeightKind::kF32: return f32;
    case WeightKind::kF16: return f16;
    case WeightKind::kQ8_0: return q8;
    case WeightKind::kQ4_K: return q4k;
    case WeightKind::kQ6_K: return q6k;
  }
  return f32;
}

const Tiles& tiles(CpuPath path, WeightKind kind) {
  const bool quant = kind == WeightKind::kQ8_0 || kind == WeightKind::kQ4_K || kind == WeightKind::kQ6_K;
  switch (path) {
    case CpuPath::kScalar: return tiles_scalar(kind);
    case CpuPath::kAvx2: return tiles_avx2(kind, false);
    case CpuPath::kAvx2Vnni: return tiles_avx2(kind, true);
    case CpuPath::kAvx512: return quant ? tiles_avx2(kind, false) : tiles_avx512(kind);
    case CpuPath::kAvx512Vnni: return tiles_avx512(kind);
  }
  return tiles_scalar(kind);
}

}  // namespace earshot::runtime::rows

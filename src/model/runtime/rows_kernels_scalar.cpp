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
  switch (kind) {
    case WeightKind::kF32: return f32;
    case WeightKind::kF16: return f16;
    case WeightKind::kQ8_0: return q8;
  }
  return f32;
}

const Tiles& tiles(CpuPath path, WeightKind kind) {
  const bool quant = kind == WeightKind::kQ8_0;
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

// Internal to rows_ops.cpp: the register tiles of runtime::rows_mul_mat, one set
// per CPU path (rows_kernels_x86.cpp, rows_kernels_scalar.cpp). A tile multiplies
// R consecutive weight rows by J consecutive activation rows over the whole
// length K and writes the R x J outputs: out[j * ldo + r] = w_r . x_j (+ bias[r]).
// Each output's sum runs in one order fixed by the path alone (k ascending in the
// path's vector lanes, then the lanes reduced in one fixed tree), never by R, J or
// the tile's place, so a row's value is the same in every tile it can fall in.
#pragma once

#include <cstdint>
#include <cstring>

#include "model/runtime/cpu_isa.h"

namespace earshot::runtime::rows {

// The activation rows of a Q8_0 product, quantised as ggml quantises them
// (quantize_row_q8_0: per block of 32, d = max |x| / 127, q = round(x / d)), laid
// out for the path's integer dot products: per row `bytes` (K of them, stride
// ldq: q + 128 for the VNNI paths, |q| for AVX2's byte products, q for the scalar
// path), `signs` (AVX2 only: q itself, stride ldq) and `scales` (8 copies of each
// block's d, stride lds floats). Rows are padded with zeros to whole pairs of blocks.
//
// Q4_K weights: the activation rows quantised to Q8_K as ggml quantises them
// (quantize_row_q8_K, per super-block of 256): `bytes` the K int8 values q as
// they are (every path), `scales` one d per super-block (stride lds floats),
// `sums` the sum of q over each 32-value sub-block, 8 per super-block (stride
// ldb int32). Q6_K weights: the same Q8_K rows (their sums unused).
struct QuantRows {
  const uint8_t* bytes = nullptr;
  const int8_t* signs = nullptr;
  const float* scales = nullptr;
  int64_t ldq = 0, lds = 0;
  const int32_t* sums = nullptr;
  int64_t ldb = 0;
};

struct Tile {
  const char* w = nullptr;   // the tile's first weight row
  int64_t ldw = 0;           // bytes between weight rows
  const float* x = nullptr;  // F16/F32: the first activation row, stride ldx floats
  int64_t ldx = 0;
  QuantRows q;  // Q8_0: the activation rows from the tile's first
  int64_t K = 0;
  float* out = nullptr;  // out[j * ldo + r]
  int64_t ldo = 0;
  const float* bias = nullptr;     // the tile's rows' biases, or null
  const char* prefetch = nullptr;  // where the next tile's weight rows start (same stride), brought to cache ahead
};

using TileFn = void (*)(const Tile&);

// A path's tiles for one weight type: fn[r - 1][j - 1] for r <= max_r, j <= max_j.
inline constexpr int kMaxTileRows = 4, kMaxTileCols = 8;
struct Tiles {
  int max_r = 0, max_j = 0;
  TileFn fn[kMaxTileRows][kMaxTileCols] = {};
};

enum class WeightKind { kF32, kF16, kQ8_0, kQ4_K, kQ6_K };

// Q4_K's super-block: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of 4-bit values.
inline constexpr int64_t kQ4KBlock = 144;
// Q6_K's super-block: 128 bytes of the values' low 4 bits (ql), 64 of their high 2
// bits (qh), 16 int8 scales (one per 16 values), f16 d. Value i of each half of 128
// (ggml's dequantize_row_q6_K): l = i % 32, g = i / 32, ql[l + 32 (g % 2)] >> 4 (g / 2)
// (low nibble for g < 2) | ((qh[l] >> 2g) & 3) << 4, minus 32, times d * scales[l / 16 + 2g].
inline constexpr int64_t kQ6KBlock = 210;
inline constexpr int64_t kQ6KHigh = 128, kQ6KScales = 192, kQ6KD = 208;

// A Q4_K super-block's 8 sub-block scales and mins (ggml's get_scale_min_k4).
inline void q4k_scales_mins(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The same, as the 8 scales' and the 8 mins' bytes packed little-endian in a
// uint64 each (byte k of `sc` is scale k), computed in registers: the SIMD paths
// broadcast them without a store and a wider reload of bytes just written.
inline void q4k_scales_mins_packed(const uint8_t* q, uint64_t& sc, uint64_t& m) {
  uint32_t u0, u1, u2;
  std::memcpy(&u0, q, 4);
  std::memcpy(&u1, q + 4, 4);
  std::memcpy(&u2, q + 8, 4);
  const uint32_t sc_lo = u0 & 0x3F3F3F3Fu, m_lo = u1 & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
  sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// The tiles of `path` for `kind` (a path the CPU has: see runtime::cpu_has).
const Tiles& tiles(CpuPath path, WeightKind kind);

// Per path (rows_kernels_x86.cpp and rows_kernels_scalar.cpp).
const Tiles& tiles_avx512(WeightKind kind);
const Tiles& tiles_avx2(WeightKind kind, bool vnni);
const Tiles& tiles_scalar(WeightKind kind);

// The 256-bit int8 tiles' encoding where the CPU has both: VEX (AVX-VNNI, the
// default) or EVEX (AVX512-VNNI + VL, what a CPU without AVX-VNNI runs). For tests;
// returns the previous choice.
bool use_evex_vnni(bool evex);

}  // namespace earshot::runtime::rows

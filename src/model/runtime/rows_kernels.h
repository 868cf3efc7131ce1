// Internal to rows_ops.cpp: the register tiles of runtime::rows_mul_mat, one set
// per CPU path (rows_kernels_x86.cpp, rows_kernels_scalar.cpp). A tile multiplies
// R consecutive weight rows by J consecutive activation rows over the whole
// length K and writes the R x J outputs: out[j * ldo + r] = w_r . x_j (+ bias[r]).
// Each output's sum runs in one order fixed by the path alone (k ascending in the
// path's vector lanes, then the lanes reduced in one fixed tree), never by R, J or
// the tile's place, so a row's value is the same in every tile it can fall in.
#pragma once

#include <cstdint>

#include "model/runtime/cpu_isa.h"

namespace earshot::runtime::rows {

// The activation rows of a Q8_0 product, quantised as ggml quantises them
// (quantize_row_q8_0: per block of 32, d = max |x| / 127, q = round(x / d)), laid
// out for the path's integer dot products: per row `bytes` (K of them, stride
// ldq: q + 128 for the VNNI paths, |q| for AVX2's byte products, q for the scalar
// path), `signs` (AVX2 only: q itself, stride ldq) and `scales` (8 copies of each
// block's d, stride lds floats). Rows are padded with zeros to whole pairs of blocks.
struct QuantRows {
  const uint8_t* bytes = nullptr;
  const int8_t* signs = nullptr;
  const float* scales = nullptr;
  int64_t ldq = 0, lds = 0;
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

enum class WeightKind { kF32, kF16, kQ8_0 };

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

// The AVX512-VNNI kernels of runtime::q8_mul_mat (q8_gemm.h), compiled for that
// instruction set with GCC's target attribute (the rest of the binary stays
// baseline x86-64) and run only where runtime::kernel_path() says the CPU has it.
//
// A thread takes 32 weight rows at a time (a panel) and lays them out for
// vpdpbusd: per block b and group q of 4 values, 128 bytes, the 4 bytes of each
// of the 32 rows (q_w + 128, as unsigned bytes), and the rows' block scales as
// f32. Tiles of up to 6 activation rows then pass over the panel: per block, 16
// vpdpbusd per activation row (2 x 16 rows x 4 values each, the activation's 4
// bytes broadcast), started from the row's correction (-128 * sum q_x), then the
// exact sums to f32, scaled by d_w * d_x and added: 12 integer and 12 float
// accumulators in registers.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/runtime/q8_gemm.h"

#define EARSHOT_T_AVX512_VNNI "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"

namespace earshot::runtime::q8 {
namespace {

constexpr int64_t kBlockBytes = 34;
constexpr int kPanel = 32;
constexpr int kMaxRows = 6;

inline int32_t load_i32(const char* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float load_f32(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// A thread's panel, laid out for the tiles (grown, never shrunk).
struct Panel {
  std::vector<uint32_t> bytes;  // nb * 8 * 32 groups of 4 bytes
  std::vector<float> scales;    // nb * 32
};

// Lays out one block of 16 weight rows: their 8 groups of 4 bytes (32 values
// each) transposed so that vector q holds group q of rows 0-15, each byte + 128.
// rows[r] null: a padding row (q_w = 0). An 8 x 8 transpose of 32-bit groups in
// each 256-bit half (rows 0-7 low, 8-15 high): two rounds of unpacks, then one
// two-source permute joins the quarters.
[[gnu::target(EARSHOT_T_AVX512_VNNI)]] inline void pack_group(const char* const* rows, int64_t offset, uint32_t* dst) {
  __m512i z[8];
  for (int k = 0; k < 8; ++k) {
    const __m256i lo =
        rows[k] ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[k] + offset)) : _mm256_setzero_si256();
    const __m256i hi = rows[k + 8] ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[k + 8] + offset))
                                   : _mm256_setzero_si256();
    z[k] = _mm512_maskz_inserti64x4(0xff, _mm512_maskz_inserti64x4(0xff, _mm512_setzero_si512(), lo, 0), hi, 1);
  }
  __m512i t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm512_maskz_unpacklo_epi32(0xffff, z[2 * k], z[2 * k + 1]);
    t[2 * k + 1] = _mm512_maskz_unpackhi_epi32(0xffff, z[2 * k], z[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (and 8-11), then 4-7 (and 12-15)
    const __m512i* a = t + 4 * h;
    u[4 * h + 0] = _mm512_maskz_unpacklo_epi64(0xff, a[0], a[2]);  // groups 0 and 4
    u[4 * h + 1] = _mm512_maskz_unpackhi_epi64(0xff, a[0], a[2]);  // 1 and 5
    u[4 * h + 2] = _mm512_maskz_unpacklo_epi64(0xff, a[1], a[3]);  // 2 and 6
    u[4 * h + 3] = _mm512_maskz_unpackhi_epi64(0xff, a[1], a[3]);  // 3 and 7
  }
  const __m512i first = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  const __m512i bias = _mm512_set1_epi32(static_cast<int>(0x80808080u));
  for (int q = 0; q < 4; ++q) {
    _mm512_storeu_si512(dst + q * kPanel, _mm512_xor_si512(_mm512_permutex2var_epi64(u[q], first, u[q + 4]), bias));
    _mm512_storeu_si512(dst + (q + 4) * kPanel,
                        _mm512_xor_si512(_mm512_permutex2var_epi64(u[q], second, u[q + 4]), bias));
  }
}

// The first n of 16 lanes (n <= 0: none).
__mmask16 lanes(int n) {
  return n >= 16 ? __mmask16{0xffff} : n <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << n) - 1u);
}

// The f16 block scales of up to 16 rows (lanes in `live`) at `at` + r * ldw as
// f32: one gather of the scale and the block's first two values per row (4 bytes,
// inside the block), the low halves kept and converted.
[[gnu::target(EARSHOT_T_AVX512_VNNI)]] inline void gather_scales(const char* at, __m512i offsets, __mmask16 live,
                                                                 float* out) {
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, offsets, at, 1);
  _mm512_storeu_ps(out, _mm512_maskz_cvtph_ps(0xffff, _mm512_maskz_cvtepi32_epi16(0xffff, words)));
}

[[gnu::target(EARSHOT_T_AVX512_VNNI)]] void pack_panel(const char* w, int64_t ldw, int64_t nb, int rows, Panel& p) {
  p.bytes.resize(static_cast<size_t>(nb * 8 * kPanel));
  p.scales.resize(static_cast<size_t>(nb * kPanel));
  const char* row[kPanel];
  for (int r = 0; r < kPanel; ++r) row[r] = r < rows ? w + r * ldw : nullptr;
  // Rows 0-15 and 16-31 of the panel as byte offsets from the first (a panel spans
  // 32 rows of at most a few KB each: within int32).
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i offsets_lo = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(ldw)));
  const __m512i offsets_hi = _mm512_add_epi32(offsets_lo, _mm512_set1_epi32(static_cast<int32_t>(16 * ldw)));
  const __mmask16 live_lo = lanes(rows), live_hi = lanes(rows - 16);
  for (int64_t b = 0; b < nb; ++b) {
    uint32_t* dst = p.bytes.data() + b * 8 * kPanel;
    pack_group(row, b * kBlockBytes + 2, dst);
    pack_group(row + 16, b * kBlockBytes + 2, dst + 16);
    float* scales = p.scales.data() + b * kPanel;
    gather_scales(w + b * kBlockBytes, offsets_lo, live_lo, scales);
    gather_scales(w + b * kBlockBytes, offsets_hi, live_hi, scales + 16);
  }
}

template <int R>
[[gnu::target(EARSHOT_T_AVX512_VNNI)]] void tile(const Panel& p, int64_t nb, const char* xq, int64_t stride, int64_t K,
                                                 float* out, int64_t ldo, const float* bias, __mmask16 m0,
                                                 __mmask16 m1) {
  __m512 f0[R], f1[R];
  for (int r = 0; r < R; ++r) f0[r] = f1[r] = _mm512_setzero_ps();
  const char* scales = xq + K;
  const char* corrs = xq + K + nb * 4;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i a0[R], a1[R];
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_set1_epi32(load_i32(corrs + r * stride + b * 4));
    const uint32_t* pb = p.bytes.data() + b * 8 * kPanel;
    for (int q = 0; q < 8; ++q) {
      const __m512i w0 = _mm512_loadu_si512(pb + q * kPanel), w1 = _mm512_loadu_si512(pb + q * kPanel + 16);
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_set1_epi32(load_i32(xq + r * stride + b * 32 + 4 * q));
        a0[r] = _mm512_dpbusd_epi32(a0[r], w0, xv);
        a1[r] = _mm512_dpbusd_epi32(a1[r], w1, xv);
      }
    }
    const __m512 d0 = _mm512_loadu_ps(p.scales.data() + b * kPanel);
    const __m512 d1 = _mm512_loadu_ps(p.scales.data() + b * kPanel + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(load_f32(scales + r * stride + b * 4));
      f0[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, a0[r]), _mm512_mul_ps(d0, dx), f0[r]);
      f1[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, a1[r]), _mm512_mul_ps(d1, dx), f1[r]);
    }
  }
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(out + r * ldo, m0, bias ? _mm512_add_ps(f0[r], b0) : f0[r]);
    if (m1) _mm512_mask_storeu_ps(out + r * ldo + 16, m1, bias ? _mm512_add_ps(f1[r], b1) : f1[r]);
  }
}

using TileFn = void (*)(const Panel&, int64_t, const char*, int64_t, int64_t, float*, int64_t, const float*, __mmask16,
                        __mmask16);
constexpr TileFn kTiles[kMaxRows] = {tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

[[gnu::target(EARSHOT_T_AVX512_VNNI)]] void quantise_rows_avx512(const float* x, int64_t ldx, int64_t K, int64_t j0,
                                                                 int64_t j1, char* out) {
  const int64_t nb = K / 32, stride = quantised_row_bytes(K);
  for (int64_t j = j0; j < j1; ++j) {
    const float* row = x + j * ldx;
    char* o = out + j * stride;
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 v0 = _mm512_loadu_ps(row + b * 32), v1 = _mm512_loadu_ps(row + b * 32 + 16);
      // (The maskz forms and the reductions through memory: GCC 12's unmasked
      // intrinsics start from _mm512_undefined_*, which -Wmaybe-uninitialized flags.)
      const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff);
      alignas(64) float m[16];
      _mm512_store_ps(m, _mm512_maskz_max_ps(0xffff, _mm512_and_ps(v0, _mm512_castsi512_ps(abs_bits)),
                                             _mm512_and_ps(v1, _mm512_castsi512_ps(abs_bits))));
      float amax = 0.0f;
      for (float e : m) amax = amax < e ? e : amax;
      const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
      const __m512 s = _mm512_set1_ps(id);
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m512i q0 =
          _mm512_maskz_cvtps_epi32(0xffff, _mm512_maskz_roundscale_ps(0xffff, _mm512_mul_ps(v0, s), kNearest));
      const __m512i q1 =
          _mm512_maskz_cvtps_epi32(0xffff, _mm512_maskz_roundscale_ps(0xffff, _mm512_mul_ps(v1, s), kNearest));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + b * 32), _mm512_maskz_cvtepi32_epi8(0xffff, q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + b * 32 + 16), _mm512_maskz_cvtepi32_epi8(0xffff, q1));
      alignas(64) int32_t qs[16];
      _mm512_store_si512(qs, _mm512_add_epi32(q0, q1));
      int32_t sum = 0;
      for (int32_t e : qs) sum += e;
      const int32_t corr = -128 * sum;
      std::memcpy(o + K + b * 4, &d, 4);
      std::memcpy(o + K + nb * 4 + b * 4, &corr, 4);
    }
  }
}

void product_avx512(const void* w, int64_t ldw, const char* xq, int64_t K, int64_t J, float* out, int64_t ldo,
                    const float* bias, int64_t i0, int64_t i1) {
  thread_local Panel panel;
  const int64_t nb = K / 32, stride = quantised_row_bytes(K);
  const auto* base = static_cast<const char*>(w);
  const int64_t row_lines = (nb * kBlockBytes + 63) / 64;
  for (int64_t p = i0; p < i1; p += kPanel) {
    const int n = static_cast<int>(std::min<int64_t>(kPanel, i1 - p));
    pack_panel(base + p * ldw, ldw, nb, n, panel);
    const __mmask16 m0 = lanes(n), m1 = lanes(n - 16);
    // The next panel's weights come from memory while this one computes: each
    // tile asks for its share of their cache lines (into L2).
    const int64_t next_rows = std::min<int64_t>(kPanel, i1 - p - kPanel);
    const int64_t lines = next_rows > 0 ? next_rows * row_lines : 0;
    const int64_t tiles = (J + kMaxRows - 1) / kMaxRows;
    const int64_t per_tile = (lines + tiles - 1) / tiles;
    const char* next = base + (p + kPanel) * ldw;
    int64_t row = 0, col = 0;  // the next line to ask for: line `col` of the next panel's row `row`
    for (int64_t j = 0; j < J; j += kMaxRows) {
      for (int64_t n = 0; n < per_tile && row < next_rows; ++n) {
        _mm_prefetch(next + row * ldw + col * 64, _MM_HINT_T1);
        if (++col == row_lines) col = 0, ++row;
      }
      const int r = static_cast<int>(std::min<int64_t>(kMaxRows, J - j));
      kTiles[r - 1](panel, nb, xq + j * stride, stride, K, out + j * ldo + p, ldo, bias ? bias + p : nullptr, m0, m1);
    }
  }
}

}  // namespace earshot::runtime::q8

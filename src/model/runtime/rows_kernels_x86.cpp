// The AVX-512 and AVX2 tiles of runtime::rows_mul_mat (rows_kernels.h), each
// compiled for its instruction set with GCC's target attribute (the rest of the
// binary stays baseline x86-64) and chosen at run time by runtime::kernel_path().
//
// Float weights (F32, F16 converted in registers): each k step loads the R weight
// vectors once and multiplies each by the J activation vectors (J x R FMAs); the
// lanes accumulate k = lane (mod width) in order, a masked last step adds zeros
// past K, then each accumulator is reduced in one fixed tree.
//
// Q8_0 weights (34-byte blocks: an f16 scale d and 32 int8 values): per block the
// integer dot product is exact, then scaled by d_w * d_x in f32. With VNNI,
// vpdpbusd multiplies unsigned by signed bytes: the activations are stored as q +
// 128, and 128 * the weights' sum (vpdpbusd of 0x80 bytes) is subtracted first,
// so each lane holds the exact sum of its four q_x * q_w. Without VNNI (AVX2),
// vpmaddubsw multiplies |q_x| by q_w with q_x's sign (no overflow while the
// values stay within +-127, as ggml's quantiser keeps them), vpmaddwd adds pairs.
//
// Q4_K weights (144-byte super-blocks of 256: rows_kernels.h): the same exact
// integer sums per super-block, the unsigned nibbles multiplied by the signed
// Q8_K activations directly (vpmaddubsw, then vpmaddwd by the sub-block scales).
// Q6_K weights (210-byte super-blocks): the 6-bit values (unsigned, 0-63)
// likewise, less 32 times the activations (vpmaddubsw of 32), per group of 16.
#include <immintrin.h>

#include <atomic>
#include <cstring>
#include <utility>

#include "model/runtime/rows_kernels.h"

#define EARSHOT_T_AVX2 "avx2,fma,f16c"
#define EARSHOT_T_AVX2_VEX_VNNI "avx2,fma,f16c,avxvnni"
#define EARSHOT_T_AVX2_EVEX_VNNI "avx2,fma,f16c,avx512f,avx512vl,avx512vnni"
#define EARSHOT_T_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define EARSHOT_T_AVX512_VNNI "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"

namespace earshot::runtime::rows {
namespace {

constexpr int64_t kQ8Block = 34;  // bytes: an f16 scale, 32 int8 values

inline uint16_t load_u16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// (AVX2's instructions only: the AVX-512 tiles inline it too.)
[[gnu::target(EARSHOT_T_AVX2), gnu::always_inline]] inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A Q4_K super-block's scalar head, as every tile reads it: its scales d and dmin,
// and its 8 sub-blocks' scales and mins; and where the next tile will read, brought
// to cache (the block's 144 bytes: three lines).
struct Q4KHead {
  float d, dmin;
  uint64_t sc, m;  // the 8 scales' and mins' bytes (q4k_scales_mins_packed)
};
[[gnu::target(EARSHOT_T_AVX2), gnu::always_inline]] inline Q4KHead q4k_head(const uint8_t* blk, const char* prefetch) {
  _mm_prefetch(prefetch, _MM_HINT_T0);
  _mm_prefetch(prefetch + 64, _MM_HINT_T0);
  _mm_prefetch(prefetch + 128, _MM_HINT_T0);
  Q4KHead h;
  h.d = _cvtsh_ss(load_u16(reinterpret_cast<const char*>(blk)));
  h.dmin = _cvtsh_ss(load_u16(reinterpret_cast<const char*>(blk) + 2));
  q4k_scales_mins_packed(blk + 4, h.sc, h.m);
  return h;
}

// ---- AVX-512 ----
// (The zero-masked forms of the intrinsics: GCC 12 warns of the plain ones' undefined vectors.)

[[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] inline float sum16(__m512 v) {
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(v), 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct FloatAvx512 {
  template <bool kF16>
  [[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] static inline __m512 load(const char* row, int64_t k) {
    if constexpr (kF16) {
      return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
    } else {
      return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
    }
  }
  template <bool kF16>
  [[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] static inline __m512 load_tail(const char* row, int64_t k,
                                                                                       __mmask16 m) {
    if constexpr (kF16) {
      return _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(m, row + 2 * k));
    } else {
      return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
    }
  }

  template <bool kF16, int R, int J>
  [[gnu::target(EARSHOT_T_AVX512)]] static void run(const Tile& t) {
    constexpr int64_t es = kF16 ? 2 : 4;
    __m512 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
    const int64_t kv = t.K / 16 * 16;
    for (int64_t k = 0; k < kv; k += 16) {
      __m512 wv[R];
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(t.prefetch + r * t.ldw + k * es, _MM_HINT_T0);
        wv[r] = load<kF16>(t.w + r * t.ldw, k);
      }
      for (int j = 0; j < J; ++j) {
        const __m512 xv = _mm512_loadu_ps(t.x + j * t.ldx + k);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
      }
    }
    if (kv < t.K) {
      const __mmask16 m = static_cast<__mmask16>((1u << (t.K - kv)) - 1);
      __m512 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_tail<kF16>(t.w + r * t.ldw, kv, m);
      for (int j = 0; j < J; ++j) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, t.x + j * t.ldx + kv);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][j]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum16(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

template <bool kF16>
struct FloatAvx512Of {
  template <int R, int J>
  static void run(const Tile& t) {
    FloatAvx512::run<kF16, R, J>(t);
  }
};

// Pairs of blocks per 512-bit vector: lanes 0-7 the first block's, 8-15 the second's.
struct Q8Avx512Vnni {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX512_VNNI)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 32;
    __m512 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
    for (int64_t p = 0; 2 * p < nb; ++p) {
      const bool single = 2 * p + 1 == nb;
      __m512i wq[R], neg[R];
      __m512 dw[R];
      for (int r = 0; r < R; ++r) {
        const char* b = t.w + r * t.ldw + p * 2 * kQ8Block;
        const char* pf = t.prefetch + r * t.ldw + p * 2 * kQ8Block;
        _mm_prefetch(pf, _MM_HINT_T0);
        _mm_prefetch(pf + 64, _MM_HINT_T0);
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
        const __m256i hi =
            single ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQ8Block + 2));
        wq[r] = _mm512_maskz_inserti64x4(0xff, _mm512_maskz_inserti64x4(0xff, _mm512_setzero_si512(), lo, 0), hi, 1);
        neg[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, wq[r]));
        const uint16_t da = load_u16(b), db = single ? 0 : load_u16(b + kQ8Block);
        dw[r] = _mm512_maskz_cvtph_ps(
            0xffff, _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(db)), _mm_set1_epi16(static_cast<short>(da))));
      }
      for (int j = 0; j < J; ++j) {
        const __m512i u = _mm512_loadu_si512(t.q.bytes + j * t.q.ldq + p * 64);
        const __m512 s = _mm512_loadu_ps(t.q.scales + j * t.q.lds + p * 16);
        for (int r = 0; r < R; ++r) {
          const __m512 dot = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_dpbusd_epi32(neg[r], u, wq[r]));
          acc[r][j] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dw[r], s), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum16(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// Q4_K (rows_kernels.h): per super-block, each weight row's 4 chunks of 64 values
// unpacked once (a chunk's 32 bytes: the low nibbles are sub-block 2c, the high
// ones sub-block 2c + 1), vpmaddubsw against the activations' 64 int8 (the
// nibbles unsigned, the activations signed: pairs within int16, 2 x 15 x 127),
// vpmaddwd by the sub-blocks' scales into int32 lanes, summed over the chunks
// (exact), then scaled by d_w * d_x into f32 lanes. The mins' term
// m_s * sum(q_x)_s, exact per sub-block in int32 lanes, is scaled by dmin_w * d_x
// into its own f32 lanes; the output is the first lanes' sum less the second's.
struct Q4KAvx512 {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX512)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    __m512 acc[R][J];
    __m256 mac[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps(), mac[r][j] = _mm256_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i zero = _mm512_setzero_si512();
    // scv[c]'s bytes from the 8 scales broadcast to every 128-bit lane: scale 2c in
    // the low 16 int16 lanes, 2c + 1 in the high 16 (0x80: a zero high byte).
    __m512i pick[4];
    for (int c = 0; c < 4; ++c) {
      const int64_t lo = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * c)));
      const int64_t hi = static_cast<int64_t>(0x8000800080008000ull | (0x0001000100010001ull * (2 * c + 1)));
      pick[c] = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i wq[R][4], scv[R][4];
      __m256i mins[R];
      float dw[R], dm[R];
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const uint8_t*>(t.w + r * t.ldw + b * kQ4KBlock);
        const Q4KHead h = q4k_head(blk, t.prefetch + r * t.ldw + b * kQ4KBlock);
        dw[r] = h.d;
        dm[r] = h.dmin;
        mins[r] = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(h.m)));
        const __m512i scales = _mm512_set1_epi64(static_cast<int64_t>(h.sc));
        for (int c = 0; c < 4; ++c) {
          // 32 bytes of nibbles in both halves; the high half shifted: its high nibbles.
          const __m512i q = _mm512_maskz_broadcast_i64x4(
              0xff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c)));
          wq[r][c] = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 4), low4);
          scv[r][c] = _mm512_shuffle_epi8(scales, pick[c]);
        }
      }
      for (int j = 0; j < J; ++j) {
        const uint8_t* xq = t.q.bytes + j * t.q.ldq + b * 256;
        __m512i x[4];
        for (int c = 0; c < 4; ++c) x[c] = _mm512_loadu_si512(xq + 64 * c);
        const float dx = t.q.scales[j * t.q.lds + b];
        const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.q.sums + j * t.q.ldb + b * 8));
        for (int r = 0; r < R; ++r) {
          __m512i is = zero;
          for (int c = 0; c < 4; ++c)
            is = _mm512_add_epi32(is, _mm512_madd_epi16(_mm512_maddubs_epi16(wq[r][c], x[c]), scv[r][c]));
          acc[r][j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, is), _mm512_set1_ps(dw[r] * dx), acc[r][j]);
          mac[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mins[r], sums)), _mm256_set1_ps(dm[r] * dx),
                                      mac[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum16(acc[r][j]) - sum8(mac[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// Q6_K: each half of 128 values as two vectors of 64 (the groups of 32 the low
// nibbles (A) and the high nibbles (B) of ql's 64 bytes give), their 2 high bits
// from qh's 32 bytes in both halves of a vector; each byte q - 32 times q_x
// exact as maddubs(q, x) - maddubs(32, x) in int16, times its group's scale
// (vpmaddwd: int32), scaled by d_w * d_x per super-block in f32 lanes.
struct Q6KAvx512 {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX512)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    __m512 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0F), high2 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
    const __m512i zero = _mm512_setzero_si512();
    // Each vector's 32 int16 lanes (pairs of values) take scale 8n + k / 8 (A) or 8n + 4 + k / 8 (B).
    __m512i pick[4];
    for (int v = 0; v < 4; ++v) {
      alignas(64) int16_t idx[32];
      for (int k = 0; k < 32; ++k) idx[k] = static_cast<int16_t>(4 * v + k / 8);
      pick[v] = _mm512_load_si512(idx);
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i wq[R][4], scv[R][4];
      float dw[R];
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const uint8_t*>(t.w + r * t.ldw + b * kQ6KBlock);
        const char* pre = t.prefetch + r * t.ldw + b * kQ6KBlock;
        _mm_prefetch(pre, _MM_HINT_T0);
        _mm_prefetch(pre + 64, _MM_HINT_T0);
        _mm_prefetch(pre + 128, _MM_HINT_T0);
        _mm_prefetch(pre + 192, _MM_HINT_T0);
        dw[r] = _cvtsh_ss(load_u16(reinterpret_cast<const char*>(blk + kQ6KD)));
        const __m512i s16 = _mm512_maskz_inserti64x4(
            0xff, zero, _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kQ6KScales))), 0);
        for (int n = 0; n < 2; ++n) {
          const __m512i ql = _mm512_loadu_si512(blk + 64 * n);
          const __m512i qh = _mm512_maskz_broadcast_i64x4(
              0xff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6KHigh + 32 * n)));
          // A: qh bits 0-1 (low half) and 2-3 (high half) to bits 4-5; B: bits 4-5 and 6-7.
          __m512i ha = _mm512_slli_epi16(qh, 2);
          ha = _mm512_mask_slli_epi16(ha, 0x0000FFFFu, ha, 2);
          const __m512i hb = _mm512_mask_srli_epi16(qh, 0xFFFF0000u, qh, 2);
          wq[r][2 * n] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(ha, high2));
          wq[r][2 * n + 1] =
              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hb, high2));
          scv[r][2 * n] = _mm512_permutexvar_epi16(pick[2 * n], s16);
          scv[r][2 * n + 1] = _mm512_permutexvar_epi16(pick[2 * n + 1], s16);
        }
      }
      for (int j = 0; j < J; ++j) {
        const uint8_t* xq = t.q.bytes + j * t.q.ldq + b * 256;
        __m512i x[4], xc[4];
        for (int c = 0; c < 4; ++c) {
          x[c] = _mm512_loadu_si512(xq + 64 * c);
          xc[c] = _mm512_maddubs_epi16(c32, x[c]);
        }
        const float dx = t.q.scales[j * t.q.lds + b];
        for (int r = 0; r < R; ++r) {
          __m512i is = zero;
          for (int c = 0; c < 4; ++c)
            is = _mm512_add_epi32(
                is, _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(wq[r][c], x[c]), xc[c]), scv[r][c]));
          acc[r][j] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, is), _mm512_set1_ps(dw[r] * dx), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum16(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// ---- AVX2 ----

struct FloatAvx2 {
  template <bool kF16>
  [[gnu::target(EARSHOT_T_AVX2), gnu::always_inline]] static inline __m256 load(const char* row, int64_t k) {
    if constexpr (kF16) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
    } else {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
    }
  }

  template <bool kF16, int R, int J>
  [[gnu::target(EARSHOT_T_AVX2)]] static void run(const Tile& t) {
    constexpr int64_t es = kF16 ? 2 : 4;
    __m256 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
    const int64_t kv = t.K / 8 * 8;
    for (int64_t k = 0; k < kv; k += 8) {
      __m256 wv[R];
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(t.prefetch + r * t.ldw + k * es, _MM_HINT_T0);
        wv[r] = load<kF16>(t.w + r * t.ldw, k);
      }
      for (int j = 0; j < J; ++j) {
        const __m256 xv = _mm256_loadu_ps(t.x + j * t.ldx + k);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
      }
    }
    if (kv < t.K) {
      // The last values, zero-padded to a vector (AVX2 has no masked 16-bit load).
      const int n = static_cast<int>(t.K - kv);
      __m256 wv[R];
      for (int r = 0; r < R; ++r) {
        alignas(32) char tail[32] = {};
        std::memcpy(tail, t.w + r * t.ldw + kv * es, static_cast<size_t>(n) * es);
        wv[r] = load<kF16>(tail, 0);
      }
      alignas(32) float xs[8] = {};
      for (int j = 0; j < J; ++j) {
        std::memcpy(xs, t.x + j * t.ldx + kv, static_cast<size_t>(n) * sizeof(float));
        const __m256 xv = _mm256_load_ps(xs);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum8(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

template <bool kF16>
struct FloatAvx2Of {
  template <int R, int J>
  static void run(const Tile& t) {
    FloatAvx2::run<kF16, R, J>(t);
  }
};

// One block per 256-bit vector. The VEX (AVX-VNNI) and EVEX (AVX512-VNNI + VL)
// encodings of the same instruction, each in a function of its own target.
#define EARSHOT_Q8_AVX2_VNNI(NAME, TARGET, DPBUSD)                                                                  \
  struct NAME {                                                                                                     \
    template <int R, int J>                                                                                         \
    [[gnu::target(TARGET)]] static void run(const Tile& t) {                                                        \
      const int64_t nb = t.K / 32;                                                                                  \
      __m256 acc[R][J];                                                                                             \
      for (int r = 0; r < R; ++r)                                                                                   \
        for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();                                                \
      const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80)), zero = _mm256_setzero_si256();                 \
      for (int64_t b = 0; b < nb; ++b) {                                                                            \
        __m256i wq[R], neg[R];                                                                                      \
        __m256 dw[R];                                                                                               \
        for (int r = 0; r < R; ++r) {                                                                               \
          const char* blk = t.w + r * t.ldw + b * kQ8Block;                                                         \
          _mm_prefetch(t.prefetch + r * t.ldw + b * kQ8Block, _MM_HINT_T0);                                         \
          wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));                                    \
          neg[r] = _mm256_sub_epi32(zero, DPBUSD(zero, k80, wq[r]));                                                \
          dw[r] = _mm256_set1_ps(_cvtsh_ss(load_u16(blk)));                                                         \
        }                                                                                                           \
        for (int j = 0; j < J; ++j) {                                                                               \
          const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.q.bytes + j * t.q.ldq + b * 32)); \
          const __m256 s = _mm256_loadu_ps(t.q.scales + j * t.q.lds + b * 8);                                       \
          for (int r = 0; r < R; ++r) {                                                                             \
            const __m256 dot = _mm256_cvtepi32_ps(DPBUSD(neg[r], u, wq[r]));                                        \
            acc[r][j] = _mm256_fmadd_ps(dot, _mm256_mul_ps(dw[r], s), acc[r][j]);                                   \
          }                                                                                                         \
        }                                                                                                           \
      }                                                                                                             \
      for (int r = 0; r < R; ++r) {                                                                                 \
        for (int j = 0; j < J; ++j) {                                                                               \
          float v = sum8(acc[r][j]);                                                                                \
          if (t.bias) v += t.bias[r];                                                                               \
          t.out[j * t.ldo + r] = v;                                                                                 \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  };

EARSHOT_Q8_AVX2_VNNI(Q8Avx2VexVnni, EARSHOT_T_AVX2_VEX_VNNI, _mm256_dpbusd_avx_epi32)
EARSHOT_Q8_AVX2_VNNI(Q8Avx2EvexVnni, EARSHOT_T_AVX2_EVEX_VNNI, _mm256_dpbusd_epi32)
#undef EARSHOT_Q8_AVX2_VNNI

struct Q8Avx2 {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX2)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 32;
    __m256 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i wq[R];
      __m256 dw[R];
      for (int r = 0; r < R; ++r) {
        const char* blk = t.w + r * t.ldw + b * kQ8Block;
        _mm_prefetch(t.prefetch + r * t.ldw + b * kQ8Block, _MM_HINT_T0);
        wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        dw[r] = _mm256_set1_ps(_cvtsh_ss(load_u16(blk)));
      }
      for (int j = 0; j < J; ++j) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.q.bytes + j * t.q.ldq + b * 32));
        const __m256i sx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.q.signs + j * t.q.ldq + b * 32));
        const __m256 s = _mm256_loadu_ps(t.q.scales + j * t.q.lds + b * 8);
        for (int r = 0; r < R; ++r) {
          const __m256i pairs = _mm256_maddubs_epi16(a, _mm256_sign_epi8(wq[r], sx));
          const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
          acc[r][j] = _mm256_fmadd_ps(dot, _mm256_mul_ps(dw[r], s), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum8(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// Q4_K on AVX2: per 32-value sub-block, vpmaddubsw of the unsigned nibbles by the
// signed activations (pairs within int16: 2 x 15 x 127), vpmaddwd by the
// sub-block's scale into int32 lanes, summed over the super-block (exact), then
// as the AVX-512 tile (rows_kernels.h).
struct Q4KAvx2 {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX2)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    __m256 acc[R][J];
    float mins[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps(), mins[r][j] = 0.0f;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const uint8_t*>(t.w + r * t.ldw + b * kQ4KBlock);
        const Q4KHead h = q4k_head(blk, t.prefetch + r * t.ldw + b * kQ4KBlock);
        const float dw = h.d, dm = h.dmin;
        __m256i is[J];
        for (int j = 0; j < J; ++j) is[j] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
          const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
          const __m256i s_lo = _mm256_set1_epi16(static_cast<int16_t>((h.sc >> (16 * c)) & 0xFF));
          const __m256i s_hi = _mm256_set1_epi16(static_cast<int16_t>((h.sc >> (16 * c + 8)) & 0xFF));
          for (int j = 0; j < J; ++j) {
            const uint8_t* xq = t.q.bytes + j * t.q.ldq + b * 256 + 64 * c;
            const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
            const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32));
            is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo), s_lo));
            is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi), s_hi));
          }
        }
        for (int j = 0; j < J; ++j) {
          const float dx = t.q.scales[j * t.q.lds + b];
          const int32_t* sums = t.q.sums + j * t.q.ldb + b * 8;
          acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[j]), _mm256_set1_ps(dw * dx), acc[r][j]);
          int32_t msum = 0;
          for (int k = 0; k < 8; ++k) msum += static_cast<int32_t>((h.m >> (8 * k)) & 0xFF) * sums[k];
          mins[r][j] += static_cast<float>(msum) * (dm * dx);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum8(acc[r][j]) - mins[r][j];
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

// Q6_K on AVX2: the four groups of 32 of each half as vectors of their own.
struct Q6KAvx2 {
  template <int R, int J>
  [[gnu::target(EARSHOT_T_AVX2)]] static void run(const Tile& t) {
    const int64_t nb = t.K / 256;
    __m256 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F), high2 = _mm256_set1_epi8(0x30), c32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const uint8_t*>(t.w + r * t.ldw + b * kQ6KBlock);
        const char* pre = t.prefetch + r * t.ldw + b * kQ6KBlock;
        _mm_prefetch(pre, _MM_HINT_T0);
        _mm_prefetch(pre + 64, _MM_HINT_T0);
        _mm_prefetch(pre + 128, _MM_HINT_T0);
        _mm_prefetch(pre + 192, _MM_HINT_T0);
        const auto* sc = reinterpret_cast<const int8_t*>(blk + kQ6KScales);
        const float dw = _cvtsh_ss(load_u16(reinterpret_cast<const char*>(blk + kQ6KD)));
        __m256i is[J];
        for (int j = 0; j < J; ++j) is[j] = _mm256_setzero_si256();
        for (int n = 0; n < 2; ++n) {
          const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n));
          const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kQ6KHigh + 32 * n));
          const __m256i wq[4] = {
              _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high2)),
              _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high2)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, high2)),
              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), high2))};
          for (int g = 0; g < 4; ++g) {
            const __m256i scale =
                _mm256_setr_m128i(_mm_set1_epi16(sc[8 * n + 2 * g]), _mm_set1_epi16(sc[8 * n + 2 * g + 1]));
            for (int j = 0; j < J; ++j) {
              const __m256i x = _mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(t.q.bytes + j * t.q.ldq + b * 256 + 128 * n + 32 * g));
              const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(wq[g], x), _mm256_maddubs_epi16(c32, x));
              is[j] = _mm256_add_epi32(is[j], _mm256_madd_epi16(p, scale));
            }
          }
        }
        for (int j = 0; j < J; ++j) {
          const float dx = t.q.scales[j * t.q.lds + b];
          acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[j]), _mm256_set1_ps(dw * dx), acc[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < J; ++j) {
        float v = sum8(acc[r][j]);
        if (t.bias) v += t.bias[r];
        t.out[j * t.ldo + r] = v;
      }
    }
  }
};

std::atomic<bool> g_evex_vnni{false};

template <typename Kernel, int R, int... Js>
void fill_row(Tiles& t, std::integer_sequence<int, Js...>) {
  ((t.fn[R][Js] = &Kernel::template run<R + 1, Js + 1>), ...);
}
template <typename Kernel, int MJ, int... Rs>
void fill(Tiles& t, std::integer_sequence<int, Rs...>) {
  (fill_row<Kernel, Rs>(t, std::make_integer_sequence<int, MJ>{}), ...);
}

// Tiles R x J for R <= MR, J <= MJ.
template <typename Kernel, int MR, int MJ>
Tiles make_tiles() {
  static_assert(MR <= kMaxTileRows && MJ <= kMaxTileCols);
  Tiles t;
  t.max_r = MR, t.max_j = MJ;
  fill<Kernel, MJ>(t, std::make_integer_sequence<int, MR>{});
  return t;
}

}  // namespace

const Tiles& tiles_avx512(WeightKind kind) {
  static const Tiles f32 = make_tiles<FloatAvx512Of<false>, 4, 6>();
  static const Tiles f16 = make_tiles<FloatAvx512Of<true>, 4, 6>();
  static const Tiles q8 = make_tiles<Q8Avx512Vnni, 3, 4>();
  static const Tiles q4k = make_tiles<Q4KAvx512, 2, 3>();
  static const Tiles q6k = make_tiles<Q6KAvx512, 2, 3>();
  switch (kind) {
    case WeightKind::kF32: return f32;
    case WeightKind::kF16: return f16;
    case WeightKind::kQ8_0: return q8;
    case WeightKind::kQ4_K: return q4k;
    case WeightKind::kQ6_K: return q6k;
  }
  return f32;
}

const Tiles& tiles_avx2(WeightKind kind, bool vnni) {
  static const Tiles f32 = make_tiles<FloatAvx2Of<false>, 3, 4>();
  static const Tiles f16 = make_tiles<FloatAvx2Of<true>, 3, 4>();
  static const Tiles q8 = make_tiles<Q8Avx2, 2, 3>();
  static const Tiles q8_vex = make_tiles<Q8Avx2VexVnni, 2, 3>();
  static const Tiles q8_evex = make_tiles<Q8Avx2EvexVnni, 2, 3>();
  static const Tiles q4k = make_tiles<Q4KAvx2, 1, 4>();
  static const Tiles q6k = make_tiles<Q6KAvx2, 1, 4>();
  switch (kind) {
    case WeightKind::kF32: return f32;
    case WeightKind::kF16: return f16;
    case WeightKind::kQ4_K: return q4k;
    case WeightKind::kQ6_K: return q6k;
    case WeightKind::kQ8_0:
      if (!vnni) return q8;
      return cpu_has_avx_vnni() && !g_evex_vnni.load(std::memory_order_relaxed) ? q8_vex : q8_evex;
  }
  return f32;
}

bool use_evex_vnni(bool evex) { return g_evex_vnni.exchange(evex); }

}  // namespace earshot::runtime::rows

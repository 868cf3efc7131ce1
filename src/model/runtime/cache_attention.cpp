// runtime::key_scores and head_values (cache_attention.h). Each path's block kernel computes up to 16
// keys' dot products with one query: the lanes of key i's register accumulate
// its values d = lane (mod width) in order of d, then the registers are added in
// one fixed tree (AVX-512: 16 registers of 16 lanes into one; AVX2: two halves of
// 8 registers of 8 lanes), so a key's score depends on the path alone. The AVX
// kernels are compiled for their instruction set with GCC's target attribute (the
// rest of the binary stays baseline x86-64).
#include "model/runtime/cache_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "model/runtime/cpu_isa.h"
#include "model/runtime/rows_ops.h"

#define EARSHOT_T_AVX2 "avx2,fma,f16c"
#define EARSHOT_T_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"

namespace earshot::runtime {
namespace {

constexpr int kBlock = 16;  // keys per block, on every path

using BlockFn = void (*)(const char* k, int64_t ldk, int n, const float* q, int64_t D, float* out);

// ---- scalar ----

template <bool kF16>
void block_scalar(const char* k, int64_t ldk, int n, const float* q, int64_t D, float* out) {
  for (int i = 0; i < n; ++i) {
    const char* row = k + i * ldk;
    float sum = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      float v;
      if constexpr (kF16) {
        uint16_t h;
        std::memcpy(&h, row + 2 * d, 2);
        v = ggml_fp16_to_fp32(h);
      } else {
        std::memcpy(&v, row + 4 * d, 4);
      }
      sum += v * q[d];
    }
    out[i] = sum;
  }
}

// ---- AVX-512 ----
// (The zero-masked forms of the intrinsics: GCC 12 warns of the plain ones' undefined vectors.)

template <bool kF16>
[[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] inline __m512 load16(const char* row, int64_t d) {
  if constexpr (kF16) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d)));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
}

// Lanes (4 per 128-bit quarter) of a and b summed pairwise: per quarter
// [a0 + a2, b0 + b2, a1 + a3, b1 + b3].
[[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] inline __m512 fold_ps(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_maskz_unpacklo_ps(0xffff, a, b), _mm512_maskz_unpackhi_ps(0xffff, a, b));
}
// Two fold_ps results (keys a, b and c, d) into per quarter [a, b, c, d]: the pairs
// of floats moved as doubles, added as floats.
[[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] inline __m512 fold_pd(__m512 ab, __m512 cd) {
  const __m512d x = _mm512_castps_pd(ab), y = _mm512_castps_pd(cd);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, x, y)),
                       _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, x, y)));
}

// acc[i]'s 16 lanes summed into lane i of the result. Every index a constant, so
// the accumulators stay in registers (a loop over them here made GCC keep the
// array on the stack: zeroed with rep stos and stored and reloaded per block).
[[gnu::target(EARSHOT_T_AVX512), gnu::always_inline]] inline __m512 sum16x16(const __m512* acc) {
  // c[j]: each quarter holds keys 4j..4j+3's partial sums; then the quarters are added.
  const __m512 c0 = fold_pd(fold_ps(acc[0], acc[1]), fold_ps(acc[2], acc[3]));
  const __m512 c1 = fold_pd(fold_ps(acc[4], acc[5]), fold_ps(acc[6], acc[7]));
  const __m512 c2 = fold_pd(fold_ps(acc[8], acc[9]), fold_ps(acc[10], acc[11]));
  const __m512 c3 = fold_pd(fold_ps(acc[12], acc[13]), fold_ps(acc[14], acc[15]));
  const __m512 d0 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xffff, c0, c1, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_maskz_shuffle_f32x4(0xffff, c0, c1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 d1 = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xffff, c2, c3, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_maskz_shuffle_f32x4(0xffff, c2, c3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xffff, d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_maskz_shuffle_f32x4(0xffff, d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

template <bool kF16, bool kFull>
[[gnu::target(EARSHOT_T_AVX512)]] void block_avx512_n(const char* k, int64_t ldk, int n, const float* q, int64_t D,
                                                      float* out) {
  __m512 acc[kBlock];
#pragma GCC unroll 16
  for (int i = 0; i < kBlock; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; d += 16) {
    const __m512 qv = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
    for (int i = 0; i < kBlock; ++i) {
      if (kFull || i < n) acc[i] = _mm512_fmadd_ps(load16<kF16>(k + i * ldk, d), qv, acc[i]);
    }
  }
  const __m512 r = sum16x16(acc);
  if constexpr (kFull) {
    _mm512_storeu_ps(out, r);
  } else {
    _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n) - 1), r);
  }
}

template <bool kF16>
void block_avx512(const char* k, int64_t ldk, int n, const float* q, int64_t D, float* out) {
  if (n == kBlock) {
    block_avx512_n<kF16, true>(k, ldk, n, q, D, out);
  } else {
    block_avx512_n<kF16, false>(k, ldk, n, q, D, out);
  }
}

// ---- AVX2 ----

template <bool kF16>
[[gnu::target(EARSHOT_T_AVX2), gnu::always_inline]] inline __m256 load8(const char* row, int64_t d) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
}

// Up to 8 keys: acc[i]'s 8 lanes summed into lane i (kFull: all 8, no per-key test).
template <bool kF16, bool kFull>
[[gnu::target(EARSHOT_T_AVX2)]] void half_avx2(const char* k, int64_t ldk, int n, const float* q, int64_t D,
                                               float* out) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t d = 0; d < D; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int i = 0; i < 8; ++i) {
      if (kFull || i < n) acc[i] = _mm256_fmadd_ps(load8<kF16>(k + i * ldk, d), qv, acc[i]);
    }
  }
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
  const __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
  if constexpr (kFull) {
    _mm256_storeu_ps(out, r);
  } else {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, r);
    std::memcpy(out, tmp, sizeof(float) * static_cast<size_t>(n));
  }
}

template <bool kF16>
void half_avx2_any(const char* k, int64_t ldk, int n, const float* q, int64_t D, float* out) {
  if (n == 8) {
    half_avx2<kF16, true>(k, ldk, n, q, D, out);
  } else {
    half_avx2<kF16, false>(k, ldk, n, q, D, out);
  }
}

template <bool kF16>
void block_avx2(const char* k, int64_t ldk, int n, const float* q, int64_t D, float* out) {
  half_avx2_any<kF16>(k, ldk, std::min(n, 8), q, D, out);
  if (n > 8) half_avx2_any<kF16>(k + 8 * ldk, ldk, n - 8, q, D, out + 8);
}

BlockFn block_fn(ggml_type type, int64_t D) {
  const bool f16 = type == GGML_TYPE_F16;
  const CpuPath path = kernel_path();
  if (path >= CpuPath::kAvx512 && D % 16 == 0) return f16 ? block_avx512<true> : block_avx512<false>;
  if (path >= CpuPath::kAvx2 && D % 8 == 0) return f16 ? block_avx2<true> : block_avx2<false>;
  return f16 ? block_scalar<true> : block_scalar<false>;
}

void key_scores_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* k = dst->src[0];
  const ggml_tensor* q = dst->src[1];
  const int64_t D = k->ne[0], F = k->ne[1], group = q->ne[2] / k->ne[2];
  const int64_t T = q->ne[1], H = q->ne[2], S = q->ne[3];
  const bool own_keys = k->ne[3] > 1;  // each group of queries its own keys (else shared)
  const int64_t blocks = (F + kBlock - 1) / kBlock;
  const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
  if (b1 <= b0) return;
  const BlockFn fn = block_fn(k->type, D);
  const auto* kbase = static_cast<const char*>(k->data);
  const auto* qbase = static_cast<const char*>(q->data);
  auto* out = static_cast<float*>(dst->data);
  const auto ldk = static_cast<int64_t>(k->nb[1]);
  // Key blocks outer: a block of every head stays in cache while every query passes.
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t f0 = b * kBlock;
    const int n = static_cast<int>(std::min<int64_t>(kBlock, F - f0));
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t h = 0; h < H; ++h) {
        const char* kb = kbase + f0 * ldk + h / group * k->nb[2] + (own_keys ? s * k->nb[3] : 0);
        for (int64_t t = 0; t < T; ++t) {
          const auto* qr = reinterpret_cast<const float*>(qbase + t * q->nb[1] + h * q->nb[2] + s * q->nb[3]);
          fn(kb, ldk, n, qr, D, out + ((s * H + h) * T + t) * F + f0);
        }
      }
    }
  }
}

// Units of 16 value rows of one head, split over the threads; each unit against
// its head's probabilities for every query of every group.
void head_values_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* v = dst->src[0];
  const ggml_tensor* p = dst->src[1];
  const int64_t F = v->ne[0], D = v->ne[1], group = p->ne[2] / v->ne[2];
  const int64_t T = p->ne[1], H = p->ne[2], S = p->ne[3];
  const bool own_values = v->ne[3] > 1;  // each group of queries its own values (else shared)
  const int64_t per_head = (D + 15) / 16, units = H * per_head;
  const int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
  const auto* vbase = static_cast<const char*>(v->data);
  const auto* probs = static_cast<const float*>(p->data);
  auto* out = static_cast<float*>(dst->data);
  const int64_t width = D * H;
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t h = u / per_head, i0 = u % per_head * 16, i1 = std::min(D, i0 + 16);
    for (int64_t s = 0; s < S; ++s) {
      const char* vb = vbase + h / group * v->nb[2] + (own_values ? s * v->nb[3] : 0);
      rows_product(v->type, vb, static_cast<int64_t>(v->nb[1]), probs + (s * H + h) * T * F, F, F, T,
                   out + s * T * width + h * D, width, nullptr, i0, i1);
    }
  }
}

}  // namespace

bool key_scores_supports(const ggml_tensor* k, const ggml_tensor* q) {
  return (k->type == GGML_TYPE_F16 || k->type == GGML_TYPE_F32) && q->type == GGML_TYPE_F32 &&
         k->nb[0] == ggml_type_size(k->type) && q->nb[0] == sizeof(float) && k->ne[0] == q->ne[0] &&
         k->ne[0] % 16 == 0 && k->ne[2] >= 1 && q->ne[2] % k->ne[2] == 0 && (k->ne[3] == 1 || k->ne[3] == q->ne[3]) &&
         k->ne[1] >= 1 && q->ne[1] >= 1;
}

ggml_tensor* key_scores(ggml_context* ctx, ggml_tensor* k, ggml_tensor* q) {
  if (!key_scores_supports(k, q)) {
    throw Error(ErrorCode::kInternal,
                std::string("key scores: want F16 or F32 keys [D, F, Hk, 1 or S] and f32 queries [D, T, H, S], H a "
                            "multiple of Hk, D of 16, each key's and query's values contiguous; got ") +
                    ggml_type_name(k->type) + " keys and " + ggml_type_name(q->type) + " queries");
  }
  ggml_tensor* args[] = {k, q};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, k->ne[1], q->ne[1], q->ne[2], q->ne[3], args, 2, key_scores_op,
                        GGML_N_TASKS_MAX, nullptr);
}

bool head_values_supports(const ggml_tensor* v, const ggml_tensor* p) {
  return (v->type == GGML_TYPE_F16 || v->type == GGML_TYPE_F32) && p->type == GGML_TYPE_F32 &&
         v->nb[0] == ggml_type_size(v->type) && ggml_is_contiguous(p) && v->ne[0] == p->ne[0] && v->ne[2] >= 1 &&
         p->ne[2] % v->ne[2] == 0 && (v->ne[3] == 1 || v->ne[3] == p->ne[3]) && v->ne[1] >= 1;
}

ggml_tensor* head_values(ggml_context* ctx, ggml_tensor* v, ggml_tensor* p) {
  if (!head_values_supports(v, p)) {
    throw Error(ErrorCode::kInternal,
                std::string("head values: want F16 or F32 values [F, D, Hv, 1 or S] with each value's frames "
                            "contiguous and contiguous f32 probabilities [F, T, H, S], H a multiple of Hv; got ") +
                    ggml_type_name(v->type) + " values and " + ggml_type_name(p->type) + " probabilities");
  }
  ggml_tensor* args[] = {v, p};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, v->ne[1] * p->ne[2], p->ne[1] * p->ne[3], 1, 1, args, 2, head_values_op,
                        GGML_N_TASKS_MAX, nullptr);
}

void key_scores_block(ggml_type type, const void* k, int64_t ldk, int n, const float* q, int64_t D, float* out) {
  if (n < 1 || n > kBlock) throw Error(ErrorCode::kInternal, "key scores: a block holds 1 to 16 keys");
  block_fn(type, D)(static_cast<const char*>(k), ldk, n, q, D, out);
}

}  // namespace earshot::runtime

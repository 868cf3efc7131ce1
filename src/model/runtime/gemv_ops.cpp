#include "model/runtime/gemv_ops.h"

#include <ggml-cpu.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace earshot::runtime {
namespace {

// Rows [i0, i1) of out (row stride ldo floats per activation row) = W x^T for W
// [rows, K] of type T (uint16_t: f16 bits; float) and J activation rows x (stride
// ldx). Each kernel takes R weight rows at a time against all J rows: R x J
// accumulators, each weight vector converted once and used J times. Each of the R
// streams prefetches where the next group of R rows will read (the hardware
// prefetcher alone, on rows of a few KB, leaves a quarter of the bandwidth unused:
// 18-20 against 23 GB/s measured on 2 Sapphire Rapids cores, 25 for a plain sum).
struct Args {
  const char* w;
  int64_t ldw;  // bytes
  const float* x;
  int64_t ldx;  // floats
  float* out;
  int64_t ldo;  // floats
  int64_t K, i0, i1;
};

template <typename T>
float scalar_value(const T* p, int64_t k) {
  if constexpr (sizeof(T) == 2) {
    return ggml_fp16_to_fp32(static_cast<ggml_fp16_t>(p[k]));
  } else {
    return p[k];
  }
}

// Rows [i0, i1) against the J activation rows, from value k0 on: what the vector
// kernels leave (rows past the last whole group of R, each row's last K % lanes
// values); `add` adds to what the kernel wrote instead of writing.
template <typename T>
void scalar_rows(const Args& a, int J, int64_t i0, int64_t i1, int64_t k0, bool add) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* w = reinterpret_cast<const T*>(a.w + i * a.ldw);
    for (int j = 0; j < J; ++j) {
      const float* x = a.x + j * a.ldx;
      float sum = 0.0f;
      for (int64_t k = k0; k < a.K; ++k) sum += scalar_value(w, k) * x[k];
      float& out = a.out[j * a.ldo + i];
      out = add ? out + sum : sum;
    }
  }
}

// (The zero-masked forms: GCC 12 warns of the plain ones' _mm512_undefined_ps.)
[[gnu::target("avx512f")]] inline __m512 load16_avx512(const uint16_t* p) {
  return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
[[gnu::target("avx512f")]] inline float sum16_avx512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}
[[gnu::target("avx512f")]] inline __m512 load16_avx512(const float* p) { return _mm512_loadu_ps(p); }

template <typename T, int J, int R>
[[gnu::target("avx512f")]] void kernel_avx512(const Args& a) {
  const int64_t k_vec = a.K / 16 * 16;
  const int64_t i_vec = a.i0 + (a.i1 - a.i0) / R * R;
  for (int64_t i = a.i0; i < i_vec; i += R) {
    __m512 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
    const T* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const T*>(a.w + (i + r) * a.ldw);
    for (int64_t k = 0; k < k_vec; k += 16) {
      __m512 x[J];
      for (int j = 0; j < J; ++j) x[j] = _mm512_loadu_ps(a.x + j * a.ldx + k);
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + k) + R * a.ldw, _MM_HINT_T0);  // the next group's
        const __m512 wv = load16_avx512(w[r] + k);
        for (int j = 0; j < J; ++j) acc[r][j] = _mm512_fmadd_ps(wv, x[j], acc[r][j]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) a.out[j * a.ldo + i + r] = sum16_avx512(acc[r][j]);
  }
  scalar_rows<T>(a, J, i_vec, a.i1, 0, false);     // the rows past the last whole group
  scalar_rows<T>(a, J, a.i0, i_vec, k_vec, true);  // the groups' last K % 16 values
}

[[gnu::target("avx2,fma,f16c")]] inline __m256 load8_avx2(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
[[gnu::target("avx2,fma,f16c")]] inline __m256 load8_avx2(const float* p) { return _mm256_loadu_ps(p); }

[[gnu::target("avx2,fma,f16c")]] inline float sum8_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <typename T, int J, int R>
[[gnu::target("avx2,fma,f16c")]] void kernel_avx2(const Args& a) {
  const int64_t k_vec = a.K / 8 * 8;
  const int64_t i_vec = a.i0 + (a.i1 - a.i0) / R * R;
  for (int64_t i = a.i0; i < i_vec; i += R) {
    __m256 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
    const T* w[R];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const T*>(a.w + (i + r) * a.ldw);
    for (int64_t k = 0; k < k_vec; k += 8) {
      __m256 x[J];
      for (int j = 0; j < J; ++j) x[j] = _mm256_loadu_ps(a.x + j * a.ldx + k);
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + k) + R * a.ldw, _MM_HINT_T0);
        const __m256 wv = load8_avx2(w[r] + k);
        for (int j = 0; j < J; ++j) acc[r][j] = _mm256_fmadd_ps(wv, x[j], acc[r][j]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < J; ++j) a.out[j * a.ldo + i + r] = sum8_avx2(acc[r][j]);
  }
  scalar_rows<T>(a, J, i_vec, a.i1, 0, false);
  scalar_rows<T>(a, J, a.i0, i_vec, k_vec, true);
}

enum class Isa { kAvx512, kAvx2, kBaseline };

Isa isa() {
  static const Isa which = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    // Every CPU with AVX2 has F16C (Haswell, Zen on); clang does not take "f16c" here.
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
    return Isa::kBaseline;
  }();
  return which;
}

// R x J accumulators within the 32 (AVX-512) or 16 (AVX2) vector registers, with
// J of them for the activations: 4 weight rows for one or two activation rows, 2
// beyond (AVX2: 1 from four activation rows).
template <typename T, int J>
void run_j(const Args& a) {
  switch (isa()) {
    case Isa::kAvx512: return kernel_avx512<T, J, (J <= 2 ? 4 : 2)>(a);
    case Isa::kAvx2: return kernel_avx2<T, J, (J <= 2 ? 4 : J <= 3 ? 2 : 1)>(a);
    case Isa::kBaseline: return scalar_rows<T>(a, J, a.i0, a.i1, 0, false);
  }
}

template <typename T>
void run(const Args& a, int J) {
  switch (J) {
    case 1: return run_j<T, 1>(a);
    case 2: return run_j<T, 2>(a);
    case 3: return run_j<T, 3>(a);
    case 4: return run_j<T, 4>(a);
    case 5: return run_j<T, 5>(a);
    case 6: return run_j<T, 6>(a);
    case 7: return run_j<T, 7>(a);
  }
}
static_assert(kGemvMaxRows == 7, "run() has a case per row count");

void gemv_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* w = dst->src[0];
  const ggml_tensor* x = dst->src[1];
  const int64_t I = w->ne[1];
  // Whole groups of 16 rows per thread: the kernels' groups of R stay whole.
  const int64_t blocks = (I + 15) / 16;
  const int64_t i0 = std::min(I, blocks * ith / nth * 16), i1 = std::min(I, blocks * (ith + 1) / nth * 16);
  if (i1 <= i0) return;
  const Args a{static_cast<const char*>(w->data),
               static_cast<int64_t>(w->nb[1]),
               static_cast<const float*>(x->data),
               static_cast<int64_t>(x->nb[1] / sizeof(float)),
               static_cast<float*>(dst->data),
               static_cast<int64_t>(dst->nb[1] / sizeof(float)),
               w->ne[0],
               i0,
               i1};
  const int J = static_cast<int>(x->ne[1]);
  if (w->type == GGML_TYPE_F16) {
    run<uint16_t>(a, J);
  } else {
    run<float>(a, J);
  }
}

}  // namespace

bool gemv_supports(const ggml_tensor* a, const ggml_tensor* b) {
  return (a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_F32) && b->type == GGML_TYPE_F32 && a->ne[2] == 1 &&
         a->ne[3] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && a->nb[0] == ggml_type_size(a->type) &&
         b->nb[0] == sizeof(float) && a->ne[0] == b->ne[0] && b->ne[1] >= 1 && b->ne[1] <= kGemvMaxRows;
}

ggml_tensor* gemv_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
  if (!gemv_supports(a, b)) {
    throw Error(ErrorCode::kInternal,
                "gemv product: wants a 2-D F16/F32 weight and 1-7 f32 rows of the same length, contiguous rows");
  }
  ggml_tensor* args[] = {a, b};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[1], b->ne[1], 1, 1, args, 2, gemv_op, GGML_N_TASKS_MAX, nullptr);
}

}  // namespace earshot::runtime

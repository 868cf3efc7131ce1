#include "model/runtime/openblas_ops.h"

#include <dlfcn.h>
#include <ggml-cpu.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"

namespace earshot::runtime {
namespace {

// The CBLAS constants of cblas.h (fixed by the CBLAS standard).
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

struct OpenBlas {
  using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                         const float* b, int ldb, float beta, float* c, int ldc);
  Sgemm sgemm = nullptr;
  std::string status;  // its description, or why it did not load
  std::string core;    // the core whose kernels it runs ("SkylakeX", "Haswell")
};

}  // namespace

const char* openblas_core_for_this_cpu() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

namespace {

OpenBlas load_openblas() {
  OpenBlas blas;
  constexpr const char* kName = "libopenblas.so.0";
  void* handle = dlopen(kName, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) {
    // Not loaded yet (a program that links it, like the benchmarks, chose already):
    // OpenBLAS reads these when it loads.
    if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
      if (const char* core = openblas_core_for_this_cpu()) setenv("OPENBLAS_CORETYPE", core, 0);
    }
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    handle = dlopen(kName, RTLD_NOW | RTLD_LOCAL);
  }
  if (handle == nullptr) {
    const char* why = dlerror();
    blas.status = std::string("OpenBLAS is not available: cannot load ") + kName + " (" + (why ? why : "unknown") +
                  "); install Debian's libopenblas0";
    return blas;
  }
  blas.sgemm = reinterpret_cast<OpenBlas::Sgemm>(dlsym(handle, "cblas_sgemm"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(handle, "openblas_set_num_threads"));
  auto corename = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_corename"));
  auto config = reinterpret_cast<char* (*)()>(dlsym(handle, "openblas_get_config"));
  if (blas.sgemm == nullptr || set_threads == nullptr) {
    blas.sgemm = nullptr;
    blas.status = std::string("OpenBLAS is not available: ") + kName + " lacks cblas_sgemm or openblas_set_num_threads";
    return blas;
  }
  // One thread per call: the calls come from each of ggml's threads.
  set_threads(1);
  std::string description = config ? config() : "";  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  if (description.rfind("OpenBLAS", 0) != 0) description = "OpenBLAS " + description;
  blas.core = corename ? corename() : "";
  blas.status = description + " (core " + (blas.core.empty() ? "?" : blas.core) + ")";
  return blas;
}

const OpenBlas& openblas() {
  static const OpenBlas blas = load_openblas();
  return blas;
}

const OpenBlas& require_openblas() {
  const OpenBlas& blas = openblas();
  if (blas.sgemm == nullptr) throw Error(ErrorCode::kUnsupported, blas.status);
  return blas;
}

// [begin, end) of n items for thread ith of nth, in multiples of `step`.
std::pair<int64_t, int64_t> share(int64_t n, int ith, int nth, int64_t step) {
  const int64_t blocks = (n + step - 1) / step;
  const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
  return {std::min(n, b0 * step), std::min(n, b1 * step)};
}

// One row of n values of a ggml type as f32.
void row_to_f32(ggml_type type, const void* in, float* out, int64_t n) {
  if (type == GGML_TYPE_F32) {
    std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  } else if (type == GGML_TYPE_F16) {
    ggml_cpu_fp16_to_fp32(static_cast<const ggml_fp16_t*>(in), out, n);
  } else if (type == GGML_TYPE_BF16) {
    ggml_cpu_bf16_to_fp32(static_cast<const ggml_bf16_t*>(in), out, n);
  } else {
    ggml_get_type_traits(type)->to_float(in, out, n);
  }
}

// to_f32: every row of src converted, rows shared among the threads.
void to_f32_op(ggml_tensor* dst, int ith, int nth, void*) {
  const ggml_tensor* src = dst->src[0];
  const int64_t rows = ggml_nrows(src);
  const auto [r0, r1] = share(rows, ith, nth, 1);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i1 = r % src->ne[1], i2 = (r / src->ne[1]) % src->ne[2], i3 = r / (src->ne[1] * src->ne[2]);
    const char* in = static_cast<const char*>(src->data) + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
    float* out =
        reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
    row_to_f32(src->type, in, out, src->ne[0]);
  }
}

int ld(const ggml_tensor* t) { return static_cast<int>(t->nb[1] / sizeof(float)); }

// Sixteen floats as one value (GCC's vector extension): one AVX-512 register, two
// AVX2 or four SSE ones, whichever variant below is running. Only used inside the
// bodies (passing one to another function would depend on the target's ABI).
using f32x16 = float __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64)));
constexpr int kLanes = 16;

// Each vectorised loop is an always-inline body compiled three times, for AVX-512,
// AVX2 and the baseline, and picked on first use by the CPU's features. (Not GCC's
// target_clones: its ifunc resolver runs before ThreadSanitizer's runtime is up and
// crashes an instrumented binary at load; and its "arch=" clones dispatch on the CPU
// model, which misses newer CPUs of the same ISA.)
#define EARSHOT_ISA_VARIANTS(name, ret, params, args)                                          \
  [[gnu::target("avx512f")]] ret name##_avx512 params { return name##_body args; }             \
  [[gnu::target("avx2,fma")]] ret name##_avx2 params { return name##_body args; }              \
  ret name##_baseline params { return name##_body args; }                                      \
  ret name params {                                                                            \
    using Fn = ret(*) params;                                                                  \
    static const Fn fn = [] {                                                                  \
      __builtin_cpu_init();                                                                    \
      if (__builtin_cpu_supports("avx512f")) return name##_avx512;                             \
      if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return name##_avx2; \
      return name##_baseline;                                                                  \
    }();                                                                                       \
    return fn args;                                                                            \
  }

// x = exp(x) for x in [-87, 88] to about 1 ulp: Cephes' expf, 2^k times a degree-6
// polynomial of the remainder. (By reference: a vector passed by value would take
// the caller's register ABI.)
[[gnu::always_inline]] inline void exp_in_range(f32x16& x) {
  const f32x16 t = x * 1.44269504088896341f;
  const f32x16 k = (t + 12582912.0f) - 12582912.0f;  // round to nearest: |t| < 2^22
  const f32x16 r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  f32x16 p = f32x16{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const i32x16 two_k = (__builtin_convertvector(k, i32x16) + 127) << 23;  // 2^k, -126 <= k <= 127
  x = p * (f32x16)two_k;
}

// x = act(x + bias) over a block of rows of C (row stride ldc), columns [0, cols)
// of it being bias columns [col0, col0 + cols): the product's epilogue, while the
// block is still in cache. GELU as ggml_gelu computes it (whisper.cpp's, the tanh
// approximation): x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)).
[[gnu::always_inline]] inline void bias_activation_body(float* c, int64_t ldc, int64_t rows, int64_t col0, int64_t cols,
                                                        const float* bias, bool gelu) {
  const f32x16 zero{};
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    for (int64_t i = 0; i < cols; i += kLanes) {
      const int lanes = static_cast<int>(std::min<int64_t>(kLanes, cols - i));
      float buf[kLanes] = {}, bbuf[kLanes] = {};
      f32x16 x, b = zero;
      if (lanes == kLanes) {
        std::memcpy(&x, row + i, sizeof x);
        if (bias) std::memcpy(&b, bias + col0 + i, sizeof b);
      } else {
        for (int l = 0; l < lanes; ++l) buf[l] = row[i + l], bbuf[l] = bias ? bias[col0 + i + l] : 0.0f;
        std::memcpy(&x, buf, sizeof x);
        std::memcpy(&b, bbuf, sizeof b);
      }
      x += b;
      if (gelu) {
        // e = exp(-2u), u = sqrt(2/pi) (x + 0.044715 x^3), clamped to exp's range.
        f32x16 y = (x + 0.044715f * x * x * x) * -1.5957691216057308f;
        const i32x16 low = y<-87.0f, high = y> 88.0f;
        y = (f32x16)((low & (i32x16)(zero - 87.0f)) | (~low & (i32x16)y));
        y = (f32x16)((high & (i32x16)(zero + 88.0f)) | (~high & (i32x16)y));
        exp_in_range(y);
        x = x / (1.0f + y);
      }
      if (lanes == kLanes) {
        std::memcpy(row + i, &x, sizeof x);
      } else {
        std::memcpy(buf, &x, sizeof x);
        for (int l = 0; l < lanes; ++l) row[i + l] = buf[l];
      }
    }
  }
}
EARSHOT_ISA_VARIANTS(bias_activation, void,
                     (float* c, int64_t ldc, int64_t rows, int64_t col0, int64_t cols, const float* bias, bool gelu),
                     (c, ldc, rows, col0, cols, bias, gelu))

// ---- the product: out [I, J] = for each j, i: act(a_i . b_j + bias_i), i.e.
// C (J x I) = B A^T, then the epilogue on each thread's own block. The bias is the
// op's third source (when given); userdata is 1 for GELU.
struct Epilogue {
  const float* bias = nullptr;
  bool gelu = false;
  bool any() const { return bias != nullptr || gelu; }
};

Epilogue epilogue_of(const ggml_tensor* dst, const void* userdata) {
  return {dst->src[2] ? static_cast<const float*>(dst->src[2]->data) : nullptr, userdata != nullptr};
}

// The rows of one sgemm call: a product is cut into blocks on a grid that depends
// on its shape only, never on the thread count, and the threads share whole
// blocks. OpenBLAS's results depend on a call's shape (its kernels' edges: split
// 1500 rows as 750 + 750 and a few percent of the values change in the last bits),
// so a split by threads would make a pass's values depend on how many threads ran
// it, which the scheduler chooses per pass (a lone pass borrows idle cores). At
// most `blocks` blocks of at least `least` rows (a multiple of 16): a few percent
// of sgemm's rate against one call (measured 95-97 against 99-103 GFLOP/s on one
// Zen 5 core at the encoders' shapes, blocks of 128-256 rows).
int64_t block_rows(int64_t n, int64_t blocks = 16, int64_t least = 128) {
  return std::max<int64_t>(least, ((n + blocks - 1) / blocks + 15) / 16 * 16);
}

void mul_mat_op(ggml_tensor* dst, int ith, int nth, void* userdata) {
  const ggml_tensor* a = dst->src[0];
  const ggml_tensor* b = dst->src[1];
  const Epilogue epilogue = epilogue_of(dst, userdata);
  const int64_t K = a->ne[0], I = a->ne[1], J = b->ne[1];
  const auto* A = static_cast<const float*>(a->data);
  const auto* B = static_cast<const float*>(b->data);
  auto* C = static_cast<float*>(dst->data);
  const OpenBlas::Sgemm sgemm = openblas().sgemm;
  const bool split_b = J >= I;  // split B's rows (the activations' rows, usually), else A's
  const int64_t n = split_b ? J : I, rows = block_rows(n);
  const auto [b0, b1] = share((n + rows - 1) / rows, ith, nth, 1);
  for (int64_t block = b0; block < b1; ++block) {
    const int64_t r0 = block * rows, r1 = std::min(n, r0 + rows);
    if (split_b) {
      sgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(r1 - r0), static_cast<int>(I), static_cast<int>(K), 1.0f,
            B + r0 * ld(b), ld(b), A, ld(a), 0.0f, C + r0 * ld(dst), ld(dst));
      if (epilogue.any()) bias_activation(C + r0 * ld(dst), ld(dst), r1 - r0, 0, I, epilogue.bias, epilogue.gelu);
    } else {
      sgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(J), static_cast<int>(r1 - r0), static_cast<int>(K), 1.0f, B,
            ld(b), A + r0 * ld(a), ld(a), 0.0f, C + r0, ld(dst));
      if (epilogue.any()) bias_activation(C + r0, ld(dst), J, r0, r1 - r0, epilogue.bias, epilogue.gelu);
    }
  }
}

// The product when the weight outweighs the activations (fewer activation rows than
// weight rows: a FastConformer window's 125-250 frames or a batch of streaming chunks
// against 0.6B weights): each thread converts its share of the weight's rows to f32
// in chunks of up to 8 MB and multiplies every activation row by each, so the weight
// is read once in its own type and the graph keeps no f32 copy of it. (Chunks much
// smaller cost sgemm its rate at few rows: 119 against 187 GFLOP/s at 112 x 4096 x
// 1024 for 1 MB chunks, measured. Where the activations are the larger side, as a
// Whisper window's 1500 rows, the graph's f32 copy and a split over them cost less.)
constexpr int64_t kChunkFloats = 2 * 1024 * 1024;

int64_t chunk_rows(int64_t k) {
  return std::clamp<int64_t>(kChunkFloats / std::max<int64_t>(k, 1) / 16 * 16, 16, 4096);
}

void mul_mat_chunked_op(ggml_tensor* dst, int ith, int nth, void* userdata) {
  const ggml_tensor* a = dst->src[0];  // the weight, in its own type
  const ggml_tensor* b = dst->src[1];  // f32
  const Epilogue epilogue = epilogue_of(dst, userdata);
  const int64_t K = a->ne[0], I = a->ne[1], J = b->ne[1];
  // Chunks on a grid of the shape alone (block_rows: at most 8, of at least 256
  // rows, sgemm's rate at few activation rows falling with smaller ones), each
  // converted and multiplied whole.
  const int64_t rows_per_chunk = std::min(chunk_rows(K), block_rows(I, 8, 256));
  const auto [c_begin, c_end] = share((I + rows_per_chunk - 1) / rows_per_chunk, ith, nth, 1);
  if (c_end <= c_begin) return;
  thread_local std::vector<float> chunk;
  chunk.resize(static_cast<size_t>(rows_per_chunk * K));
  const auto* B = static_cast<const float*>(b->data);
  auto* C = static_cast<float*>(dst->data);
  const OpenBlas::Sgemm sgemm = openblas().sgemm;
  for (int64_t c = c_begin; c < c_end; ++c) {
    const int64_t c0 = c * rows_per_chunk, rows = std::min(rows_per_chunk, I - c0);
    for (int64_t r = 0; r < rows; ++r) {
      row_to_f32(a->type, static_cast<const char*>(a->data) + (c0 + r) * a->nb[1], chunk.data() + r * K, K);
    }
    sgemm(kRowMajor, kNoTrans, kTrans, static_cast<int>(J), static_cast<int>(rows), static_cast<int>(K), 1.0f, B, ld(b),
          chunk.data(), static_cast<int>(K), 0.0f, C + c0, ld(dst));
    if (epilogue.any()) bias_activation(C + c0, ld(dst), J, c0, rows, epilogue.bias, epilogue.gelu);
  }
}

// ---- attention

// s = exp(s - max(s)) in place; returns the sum. exp(x) for x <= 0 to about 1 ulp:
// Cephes' expf, 2^n times a degree-6 polynomial; the last block is padded and masked.
[[gnu::always_inline]] inline float softmax_numerators_body(float* s, int n) {
  const f32x16 zero{};
  f32x16 m = zero - INFINITY;
  for (int i = 0; i < n; i += kLanes) {
    f32x16 x = m;
    if (i + kLanes <= n) {
      std::memcpy(&x, s + i, sizeof x);
    } else {
      float tail[kLanes];
      std::memcpy(tail, &x, sizeof x);
      for (int l = 0; i + l < n; ++l) tail[l] = s[i + l];
      std::memcpy(&x, tail, sizeof x);
    }
    const i32x16 greater = x > m;
    m = (f32x16)((greater & (i32x16)x) | (~greater & (i32x16)m));
  }
  float mx = m[0];
  for (int l = 1; l < kLanes; ++l) mx = std::max(mx, m[l]);
  f32x16 acc = zero;
  for (int i = 0; i < n; i += kLanes) {
    const bool full = i + kLanes <= n;
    f32x16 x = zero;
    float tail[kLanes] = {};
    if (full) {
      std::memcpy(&x, s + i, sizeof x);
    } else {
      for (int l = 0; i + l < n; ++l) tail[l] = s[i + l];
      std::memcpy(&x, tail, sizeof x);
    }
    x -= mx;
    const i32x16 low = x < -87.0f;  // exp < 1.6e-38: 0 (and -inf, a masked score, exactly 0)
    x = (f32x16)((low & (i32x16)(zero - 87.0f)) | (~low & (i32x16)x));
    exp_in_range(x);
    f32x16 e = (f32x16)(~low & (i32x16)x);
    if (full) {
      std::memcpy(s + i, &e, sizeof e);
    } else {
      i32x16 lane{};
      for (int l = 0; l < kLanes; ++l) lane[l] = i + l < n ? -1 : 0;
      e = (f32x16)(lane & (i32x16)e);
      std::memcpy(tail, &e, sizeof e);
      for (int l = 0; i + l < n; ++l) s[i + l] = tail[l];
    }
    acc += e;
  }
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}
EARSHOT_ISA_VARIANTS(softmax_numerators, float, (float* s, int n), (s, n))

constexpr int64_t kQueryBlock = 256;

// A block of score rows S [rows x n] -> out [rows x hd] (row stride ldo) =
// softmax(S) V, V [n x hd] (row stride ldv), or given as its transpose [hd x n]
// (v_trans): the exps in place, the product by sgemm, then each row divided by
// its sum (hd values rather than n).
void softmax_times_values(float* S, int rows, int64_t n, const float* V, int ldv, float* out, int ldo, int64_t hd,
                          bool v_trans = false) {
  float sums[kQueryBlock];
  for (int r = 0; r < rows; ++r) sums[r] = softmax_numerators(S + r * n, static_cast<int>(n));
  openblas().sgemm(kRowMajor, kNoTrans, v_trans ? kTrans : kNoTrans, rows, static_cast<int>(hd), static_cast<int>(n),
                   1.0f, S, static_cast<int>(n), V, ldv, 0.0f, out, ldo);
  for (int r = 0; r < rows; ++r) {
    const float inv = 1.0f / sums[r];
    for (int64_t c = 0; c < hd; ++c) out[r * ldo + c] *= inv;
  }
}

void attention_op(ggml_tensor* dst, int ith, int nth, void* userdata) {
  const ggml_tensor* q = dst->src[0];
  const ggml_tensor* k = dst->src[1];
  const ggml_tensor* v = dst->src[2];
  const int n_head = static_cast<int>(reinterpret_cast<intptr_t>(userdata));
  const int64_t D = q->ne[0], Nq = q->ne[1], Nk = k->ne[1];
  const int64_t hd = D / n_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t blocks = (Nq + kQueryBlock - 1) / kQueryBlock;
  const auto [t0, t1] = share(blocks * n_head, ith, nth, 1);
  if (t1 <= t0) return;
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(kQueryBlock * Nk));
  const OpenBlas::Sgemm sgemm = openblas().sgemm;
  const auto* Q = static_cast<const float*>(q->data);
  const auto* K = static_cast<const float*>(k->data);
  const auto* V = static_cast<const float*>(v->data);
  auto* O = static_cast<float*>(dst->data);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t h = t / blocks, q0 = (t % blocks) * kQueryBlock;
    const int rows = static_cast<int>(std::min(kQueryBlock, Nq - q0));
    float* S = scores.data();
    sgemm(kRowMajor, kNoTrans, kTrans, rows, static_cast<int>(Nk), static_cast<int>(hd), scale, Q + q0 * ld(q) + h * hd,
          ld(q), K + h * hd, ld(k), 0.0f, S, static_cast<int>(Nk));
    softmax_times_values(S, rows, Nk, V + h * hd, ld(v), O + q0 * ld(dst) + h * hd, ld(dst), hd);
  }
}

// Masked grouped-query attention over the views a graph has (libllama's KV cache):
// q [d, T, H] f32, k [d, n_kv, Hk] and v ([n_kv, d, Hk] when stored transposed,
// else [d, n_kv, Hk]) of any type ggml converts, mask [n_kv, T] f32 or null;
// userdata: the scale's bits, and bit 32 set for a transposed v.
// Per head and block of queries: the head's query rows, and its KV head's keys and
// values as f32 rows (converted once per KV head a thread meets in turn), then the
// scores by sgemm, the mask added, and softmax_times_values.
void masked_attention_op(ggml_tensor* dst, int ith, int nth, void* userdata) {
  const ggml_tensor* q = dst->src[0];
  const ggml_tensor* k = dst->src[1];
  const ggml_tensor* v = dst->src[2];
  const ggml_tensor* mask = dst->src[3];
  const auto packed = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(userdata));
  const auto bits = static_cast<uint32_t>(packed);
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const bool v_trans = (packed >> 32) != 0;
  const int64_t d = q->ne[0], T = q->ne[1], H = q->ne[2], S = q->ne[3], n_kv = k->ne[1], Hk = k->ne[2];
  const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const auto [t0, t1] = share(blocks * H * S, ith, nth, 1);
  if (t1 <= t0) return;
  thread_local std::vector<float> scores, queries, keys, values;
  scores.resize(static_cast<size_t>(kQueryBlock * n_kv));
  queries.resize(static_cast<size_t>(kQueryBlock * d));
  keys.resize(static_cast<size_t>(n_kv * d));
  values.resize(static_cast<size_t>(n_kv * d));
  const OpenBlas::Sgemm sgemm = openblas().sgemm;
  const auto base = [](const ggml_tensor* t) { return static_cast<const char*>(t->data); };
  // The cells any row of stream s sees: past the last column its mask leaves open,
  // every row weighs 0 (libllama pads its KV views to 256 cells at least, so a
  // prompt over 130 positions would otherwise convert, score and weigh 256).
  const auto open_cells = [&](int64_t s) {
    if (mask == nullptr) return n_kv;
    int64_t used = 1;
    for (int64_t r = 0; r < T; ++r) {
      const auto* m = reinterpret_cast<const float*>(base(mask) + r * mask->nb[1] + s * mask->nb[3]);
      int64_t j = n_kv;
      while (j > used && m[j - 1] == -INFINITY) --j;
      used = j;
    }
    return used;
  };
  int64_t converted = -1;               // the stream's KV head in keys / values (s * Hk + hk)
  int64_t cells_of = -1, cells = n_kv;  // open_cells(cells_of)
  for (int64_t task = t0; task < t1; ++task) {
    const int64_t s = task / (blocks * H), h = task / blocks % H, i0 = (task % blocks) * kQueryBlock;
    const int64_t hk = h / (H / Hk);
    const int rows = static_cast<int>(std::min(kQueryBlock, T - i0));
    if (s != cells_of) {
      cells = open_cells(s);
      cells_of = s;
    }
    if (s * Hk + hk != converted) {
      const char* kb = base(k) + hk * k->nb[2] + s * k->nb[3];
      const char* vb = base(v) + hk * v->nb[2] + s * v->nb[3];
      for (int64_t j = 0; j < cells; ++j) row_to_f32(k->type, kb + j * k->nb[1], keys.data() + j * d, d);
      if (v_trans) {  // d rows of n_kv, kept so: sgemm takes them transposed
        for (int64_t c = 0; c < d; ++c) row_to_f32(v->type, vb + c * v->nb[1], values.data() + c * cells, cells);
      } else {
        for (int64_t j = 0; j < cells; ++j) row_to_f32(v->type, vb + j * v->nb[1], values.data() + j * d, d);
      }
      converted = s * Hk + hk;
    }
    for (int r = 0; r < rows; ++r) {
      std::memcpy(queries.data() + r * d, base(q) + (i0 + r) * q->nb[1] + h * q->nb[2] + s * q->nb[3],
                  d * sizeof(float));
    }
    float* scores_row = scores.data();
    sgemm(kRowMajor, kNoTrans, kTrans, rows, static_cast<int>(cells), static_cast<int>(d), scale, queries.data(),
          static_cast<int>(d), keys.data(), static_cast<int>(d), 0.0f, scores_row, static_cast<int>(cells));
    if (mask != nullptr) {
      for (int r = 0; r < rows; ++r) {
        const auto* m = reinterpret_cast<const float*>(base(mask) + (i0 + r) * mask->nb[1] + s * mask->nb[3]);
        for (int64_t j = 0; j < cells; ++j) scores_row[r * cells + j] += m[j];
      }
    }
    softmax_times_values(scores_row, rows, cells, values.data(), static_cast<int>(v_trans ? cells : d),
                         static_cast<float*>(dst->data) + (s * T + i0) * ld(dst) + h * d, ld(dst), d, v_trans);
  }
}

// Relative-position attention (Transformer-XL's, as the FastConformer computes it):
// src q, k, v [D, T], p [D, 2T - 1] (positions T - 1 ... -(T - 1)), u and w [D] (the
// content and position biases), mask [T, T] or null. Per head and block of queries:
// content scores (q + u) k^T and position scores (q + w) p^T over the block's
// window of positions, shifted so that query i and key j meet at position i - j.
void relpos_attention_op(ggml_tensor* dst, int ith, int nth, void* userdata) {
  const ggml_tensor* q = dst->src[0];
  const ggml_tensor* k = dst->src[1];
  const ggml_tensor* v = dst->src[2];
  const ggml_tensor* p = dst->src[3];
  const auto* u = static_cast<const float*>(dst->src[4]->data);
  const auto* w = static_cast<const float*>(dst->src[5]->data);
  const ggml_tensor* mask = dst->src[6];
  const int n_head = static_cast<int>(reinterpret_cast<intptr_t>(userdata));
  const int64_t D = q->ne[0], T = q->ne[1], hd = D / n_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const auto [t0, t1] = share(blocks * n_head, ith, nth, 1);
  if (t1 <= t0) return;
  thread_local std::vector<float> scores, positions, qu, qw;
  scores.resize(static_cast<size_t>(kQueryBlock * T));
  positions.resize(static_cast<size_t>(kQueryBlock * (T + kQueryBlock)));
  qu.resize(static_cast<size_t>(kQueryBlock * hd));
  qw.resize(static_cast<size_t>(kQueryBlock * hd));
  const OpenBlas::Sgemm sgemm = openblas().sgemm;
  const auto* Q = static_cast<const float*>(q->data);
  const auto* K = static_cast<const float*>(k->data);
  const auto* V = static_cast<const float*>(v->data);
  const auto* P = static_cast<const float*>(p->data);
  auto* O = static_cast<float*>(dst->data);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t h = t / blocks, i0 = (t % blocks) * kQueryBlock;
    const int rows = static_cast<int>(std::min(kQueryBlock, T - i0));
    for (int r = 0; r < rows; ++r) {
      const float* qrow = Q + (i0 + r) * ld(q) + h * hd;
      for (int64_t c = 0; c < hd; ++c) {
        qu[r * hd + c] = qrow[c] + u[h * hd + c];
        qw[r * hd + c] = qrow[c] + w[h * hd + c];
      }
    }
    float* S = scores.data();
    sgemm(kRowMajor, kNoTrans, kTrans, rows, static_cast<int>(T), static_cast<int>(hd), 1.0f, qu.data(),
          static_cast<int>(hd), K + h * hd, ld(k), 0.0f, S, static_cast<int>(T));
    // Query i0 + r meets key j at column T - 1 - (i0 + r) + j of p: the block spans
    // columns [T - i0 - rows, 2T - 1 - i0).
    const int64_t c_lo = T - i0 - rows, width = T + rows - 1;
    float* R = positions.data();
    sgemm(kRowMajor, kNoTrans, kTrans, rows, static_cast<int>(width), static_cast<int>(hd), 1.0f, qw.data(),
          static_cast<int>(hd), P + c_lo * ld(p) + h * hd, ld(p), 0.0f, R, static_cast<int>(width));
    for (int r = 0; r < rows; ++r) {
      float* srow = S + r * T;
      const float* rrow = R + r * width + (rows - 1 - r);  // column T - 1 - (i0 + r) - c_lo
      const float* mrow =
          mask ? reinterpret_cast<const float*>(static_cast<const char*>(mask->data) + (i0 + r) * mask->nb[1])
               : nullptr;
      for (int64_t j = 0; j < T; ++j) srow[j] = (srow[j] + rrow[j]) * scale + (mrow ? mrow[j] : 0.0f);
    }
    softmax_times_values(S, rows, T, V + h * hd, ld(v), O + i0 * ld(dst) + h * hd, ld(dst), hd);
  }
}

void require_2d_rows(const ggml_tensor* t, const char* what) {
  if (t->ne[2] != 1 || t->ne[3] != 1 || t->nb[0] != ggml_type_size(t->type)) {
    throw Error(ErrorCode::kInternal,
                std::string("OpenBLAS op: ") + what + " must be a 2-D tensor with contiguous rows");
  }
}

}  // namespace

CpuKernels parse_cpu_kernels(std::string_view text, std::string_view label) {
  if (text == "auto") return CpuKernels::kAuto;
  if (text == "ggml") return CpuKernels::kGgml;
  if (text == "openblas") return CpuKernels::kOpenBlas;
  throw Error(ErrorCode::kInvalidArgument,
              std::string(label) + " must be auto, ggml or openblas, not '" + std::string(text) + "'");
}

std::string_view to_string(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::kAuto: return "auto";
    case CpuKernels::kGgml: return "ggml";
    case CpuKernels::kOpenBlas: return "openblas";
  }
  return "?";
}

bool openblas_available() { return openblas().sgemm != nullptr; }
std::string openblas_status() { return openblas().status; }

std::string openblas_core() { return openblas().sgemm ? openblas().core : ""; }

bool openblas_runs_avx512() {
  std::string core = openblas_core();
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
}

bool amx_wanted(CpuKernels requested, ggml_backend_dev_t device) {
  return requested == CpuKernels::kAuto && (device == nullptr || is_cpu(device)) && amx_buffer_type() != nullptr;
}

CpuKernels resolve_cpu_kernels(CpuKernels requested, bool on_cpu) {
  switch (requested) {
    case CpuKernels::kGgml: return CpuKernels::kGgml;
    case CpuKernels::kAuto: return on_cpu && openblas_available() ? CpuKernels::kOpenBlas : CpuKernels::kGgml;
    case CpuKernels::kOpenBlas:
      if (!on_cpu)
        throw Error(ErrorCode::kUnsupported,
                    "the OpenBLAS kernels run on the CPU only; use --cpu-kernels auto or ggml with a GPU device");
      require_openblas();
      return CpuKernels::kOpenBlas;
  }
  return CpuKernels::kGgml;
}

ggml_tensor* to_f32(ggml_context* ctx, ggml_tensor* a) {
  if (a->type == GGML_TYPE_F32) return a;
  if (in_amx_buffer(a)) {
    throw Error(ErrorCode::kInternal, std::string("tensor ") + ggml_get_name(a) +
                                          " is in the AMX kernels' layout: only runtime::mul_mat reads it");
  }
  if (ggml_get_type_traits(a->type)->to_float == nullptr) {
    throw Error(ErrorCode::kUnsupported, std::string("tensor ") + ggml_get_name(a) + " has type " +
                                             ggml_type_name(a->type) + ", which ggml cannot convert to f32");
  }
  ggml_tensor* args[] = {a};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, to_f32_op,
                        GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* blas_mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* bias, Activation act) {
  if (in_amx_buffer(a)) {  // its bytes are in the AMX kernels' layout, and those outrun sgemm
    ggml_tensor* out = mul_mat(ctx, a, b);
    if (bias != nullptr) out = ggml_add(ctx, out, bias);
    return act == Activation::kGelu ? ggml_gelu(ctx, out) : out;
  }
  require_openblas();
  require_2d_rows(a, "the first operand");
  require_2d_rows(b, "the second operand");
  if (a->ne[0] != b->ne[0]) throw Error(ErrorCode::kInternal, "OpenBLAS product: the operands' rows differ in length");
  if (bias != nullptr && ggml_nelements(bias) != a->ne[1]) {
    throw Error(ErrorCode::kInternal, "OpenBLAS product: the bias is not one value per output column");
  }
  void* userdata = reinterpret_cast<void*>(static_cast<intptr_t>(act == Activation::kGelu));  // epilogue_of
  // A weight not in f32 with more rows than the activations: convert it chunk by chunk.
  const bool chunked = a->type != GGML_TYPE_F32 && a->ne[1] > b->ne[1];
  ggml_tensor* args[] = {chunked ? a : to_f32(ctx, a), to_f32(ctx, b), bias ? to_f32(ctx, bias) : nullptr};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[1], b->ne[1], 1, 1, args, bias ? 3 : 2,
                        chunked ? mul_mat_chunked_op : mul_mat_op, GGML_N_TASKS_MAX, userdata);
}

ggml_tensor* blas_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, int n_head) {
  require_openblas();
  for (const ggml_tensor* t : {q, k, v}) {
    require_2d_rows(t, "an attention input");
    if (t->type != GGML_TYPE_F32) throw Error(ErrorCode::kInternal, "OpenBLAS attention: inputs must be f32");
  }
  if (n_head < 1 || q->ne[0] % n_head != 0 || k->ne[0] != q->ne[0] || v->ne[0] != q->ne[0] || v->ne[1] != k->ne[1]) {
    throw Error(ErrorCode::kInternal, "OpenBLAS attention: inconsistent shapes");
  }
  ggml_tensor* args[] = {q, k, v};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], 1, 1, args, 3, attention_op, GGML_N_TASKS_MAX,
                        reinterpret_cast<void*>(static_cast<intptr_t>(n_head)));
}

ggml_tensor* blas_masked_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, bool v_trans,
                                   ggml_tensor* mask, float scale) {
  static_assert(sizeof(uintptr_t) >= 8, "the op's userdata packs the scale and the layout");
  require_openblas();
  const int64_t d = q->ne[0], T = q->ne[1], H = q->ne[2], n_kv = k->ne[1], Hk = k->ne[2];
  const auto converts = [](const ggml_tensor* t) {
    return t->type == GGML_TYPE_F32 || ggml_get_type_traits(t->type)->to_float != nullptr;
  };
  const int64_t S = q->ne[3];  // streams (libllama's KV streams of several sequences), each its own KV
  if (q->type != GGML_TYPE_F32 || q->nb[0] != sizeof(float) || k->ne[3] != S || v->ne[3] != S || k->ne[0] != d ||
      Hk < 1 || H % Hk != 0 || k->nb[0] != ggml_type_size(k->type) || v->nb[0] != ggml_type_size(v->type) ||
      !converts(k) || !converts(v) || v->ne[2] != Hk ||
      (v_trans ? (v->ne[0] != n_kv || v->ne[1] != d) : (v->ne[0] != d || v->ne[1] != n_kv)) ||
      (mask && (mask->type != GGML_TYPE_F32 || mask->nb[0] != sizeof(float) || mask->ne[0] != n_kv || mask->ne[1] < T ||
                mask->ne[2] != 1 || mask->ne[3] != S))) {
    throw Error(ErrorCode::kInternal, "OpenBLAS masked attention: unsupported shapes, types or strides");
  }
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof bits);
  ggml_tensor* args[] = {q, k, v, mask};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, d * H, T * S, 1, 1, args, mask ? 4 : 3, masked_attention_op,
                        GGML_N_TASKS_MAX,
                        reinterpret_cast<void*>(static_cast<uintptr_t>(bits) | (uintptr_t{v_trans} << 32)));
}

ggml_tensor* blas_relpos_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* p,
                                   ggml_tensor* u, ggml_tensor* w, ggml_tensor* mask, int n_head) {
  require_openblas();
  for (const ggml_tensor* t : {q, k, v, p}) {
    require_2d_rows(t, "an attention input");
    if (t->type != GGML_TYPE_F32) throw Error(ErrorCode::kInternal, "OpenBLAS attention: inputs must be f32");
  }
  const int64_t D = q->ne[0], T = q->ne[1];
  if (n_head < 1 || D % n_head != 0 || k->ne[0] != D || v->ne[0] != D || p->ne[0] != D || k->ne[1] != T ||
      v->ne[1] != T || p->ne[1] != 2 * T - 1 || ggml_nelements(u) != D || ggml_nelements(w) != D ||
      (mask && (mask->type != GGML_TYPE_F32 || mask->ne[0] != T || mask->ne[1] != T))) {
    throw Error(ErrorCode::kInternal, "OpenBLAS relative-position attention: inconsistent shapes");
  }
  ggml_tensor* args[] = {q, k, v, p, to_f32(ctx, u), to_f32(ctx, w), mask};
  return ggml_custom_4d(ctx, GGML_TYPE_F32, D, T, 1, 1, args, mask ? 7 : 6, relpos_attention_op, GGML_N_TASKS_MAX,
                        reinterpret_cast<void*>(static_cast<intptr_t>(n_head)));
}

MatMul step_products(CpuKernels requested, bool on_cpu, int64_t n_rows, int64_t openblas_min_rows) {
  if (!on_cpu || requested == CpuKernels::kGgml) return MatMul{};
  if (requested == CpuKernels::kOpenBlas) {
    resolve_cpu_kernels(requested, on_cpu);  // throws where OpenBLAS cannot load
    return n_rows >= openblas_min_rows ? MatMul{true, false} : MatMul{false, true};
  }
  if (n_rows <= kRowsOpMaxRows) return MatMul{false, true};
  MatMul mm = encoder_products(requested, on_cpu);
  mm.rows = !mm.openblas;  // without OpenBLAS, the few-row op still
  return mm;
}

MatMul encoder_products(CpuKernels requested, bool on_cpu) {
  MatMul mm;
  mm.openblas = resolve_cpu_kernels(requested, on_cpu) == CpuKernels::kOpenBlas;
  mm.int8 = on_cpu && requested == CpuKernels::kAuto && q8_gemm_available();
  return mm;
}

}  // namespace earshot::runtime

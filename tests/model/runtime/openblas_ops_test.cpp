// runtime::blas_mul_mat / blas_attention (OpenBLAS's sgemm in ggml's threads)
// against references computed in double from the same inputs, on the CPU backend,
// with 1 to 3 threads and shapes that are not multiples of any block size.
// OpenBLAS is this test's oracle-free dependency: without it the tests fail
// (scripts/bootstrap.sh installs Debian's libopenblas).
#include "model/runtime/openblas_ops.h"

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "ops_test_util.h"

namespace earshot::runtime {
namespace {

using testing::normal_values;

// A graph over tensors whose data lives in the context (no allocator needed).
struct Graph {
  ggml_context_ptr ctx;
  explicit Graph(size_t bytes) {
    const ggml_init_params params{bytes + ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, false};
    ctx.reset(ggml_init(params));
  }
  ggml_tensor* matrix(ggml_type type, int64_t cols, int64_t rows, const std::vector<float>& values) {
    ggml_tensor* t = ggml_new_tensor_2d(ctx.get(), type, cols, rows);
    if (type == GGML_TYPE_F32) {
      std::copy(values.begin(), values.end(), static_cast<float*>(t->data));
    } else {
      ggml_quantize_chunk(type, values.data(), t->data, 0, rows, cols, nullptr);
    }
    return t;
  }
  std::vector<float> compute(ggml_tensor* out, int threads) {
    ggml_cgraph* graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx.get(), graph, threads), GGML_STATUS_SUCCESS);
    const auto* data = static_cast<const float*>(out->data);
    return std::vector<float>(data, data + ggml_nelements(out));
  }
};

// a's values as the product sees them (rounded to the weight type).
std::vector<float> as_stored(ggml_type type, const std::vector<float>& values, int64_t cols, int64_t rows) {
  if (type == GGML_TYPE_F32) return values;
  std::vector<uint8_t> packed(ggml_row_size(type, cols) * rows);
  ggml_quantize_chunk(type, values.data(), packed.data(), 0, rows, cols, nullptr);
  std::vector<float> back(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    ggml_get_type_traits(type)->to_float(packed.data() + r * ggml_row_size(type, cols), back.data() + r * cols, cols);
  }
  return back;
}

struct ProductCase {
  ggml_type type;
  int64_t k, i, j;
  int threads;
};

class BlasMulMat : public ::testing::TestWithParam<ProductCase> {};

TEST_P(BlasMulMat, EqualsTheProductInDouble) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  const ProductCase c = GetParam();
  const std::vector<float> a = normal_values(c.k * c.i, 1), b = normal_values(c.k * c.j, 2);
  Graph g(ggml_row_size(GGML_TYPE_F32, c.k) * (c.i + 2 * c.j) + 4 * (c.i * c.j) * 2 + (1 << 20));
  ggml_tensor* out = blas_mul_mat(g.ctx.get(), g.matrix(c.type, c.k, c.i, a), g.matrix(GGML_TYPE_F32, c.k, c.j, b));
  ASSERT_EQ(out->ne[0], c.i);
  ASSERT_EQ(out->ne[1], c.j);
  const std::vector<float> got = g.compute(out, c.threads);
  const std::vector<float> a_stored = as_stored(c.type, a, c.k, c.i);
  double worst = 0;
  for (int64_t j = 0; j < c.j; ++j)
    for (int64_t i = 0; i < c.i; ++i) {
      double want = 0;
      for (int64_t l = 0; l < c.k; ++l) want += double(a_stored[i * c.k + l]) * double(b[j * c.k + l]);
      worst = std::max(worst, std::fabs(want - got[j * c.i + i]));
    }
  // f32 accumulation over k terms of unit variance (measured <= 1.4e-5 at k = 96).
  EXPECT_LT(worst, 1e-5 * std::sqrt(double(c.k))) << ggml_type_name(c.type);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlasMulMat,
                         ::testing::Values(ProductCase{GGML_TYPE_F32, 70, 37, 53, 2},      // split over b's rows
                                           ProductCase{GGML_TYPE_F32, 70, 53, 37, 3},      // split over a's rows
                                           ProductCase{GGML_TYPE_F16, 96, 130, 301, 2},    // a weight in f16
                                           ProductCase{GGML_TYPE_Q8_0, 64, 48, 33, 2},     // and in q8_0
                                           ProductCase{GGML_TYPE_F16, 40, 5, 3, 3},        // fewer rows than threads
                                           ProductCase{GGML_TYPE_F16, 64, 70, 600, 2},     // f16 weight, many rows
                                           ProductCase{GGML_TYPE_F16, 2048, 2500, 20, 2},  // chunks of 1024 rows
                                           ProductCase{GGML_TYPE_F32, 33, 17, 200, 1}));

// A product's values never depend on the thread count (the scheduler chooses it
// per pass): split over b's rows, over a's rows, and a weight converted in chunks,
// each with several blocks and with GELU's epilogue, bit for bit on 1 to 5 threads.
TEST(BlasMulMat, TheValuesDoNotDependOnTheThreadCount) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  for (const ProductCase& c : {ProductCase{GGML_TYPE_F32, 64, 96, 1500, 0},     // b's rows: 12 blocks
                               ProductCase{GGML_TYPE_F32, 64, 1000, 90, 0},     // a's rows
                               ProductCase{GGML_TYPE_F16, 64, 2100, 40, 0}}) {  // chunks of the weight
    const std::vector<float> a = normal_values(c.k * c.i, 1), b = normal_values(c.k * c.j, 2),
                             bias = normal_values(c.i, 3);
    std::vector<std::vector<float>> by_threads;
    for (int threads = 1; threads <= 5; ++threads) {
      Graph g(ggml_row_size(GGML_TYPE_F32, c.k) * (2 * c.i + 2 * c.j) + 4 * (c.i * c.j) * 2 + (1 << 20));
      ggml_tensor* out = blas_mul_mat(g.ctx.get(), g.matrix(c.type, c.k, c.i, a), g.matrix(GGML_TYPE_F32, c.k, c.j, b),
                                      g.matrix(GGML_TYPE_F32, c.i, 1, bias), Activation::kGelu);
      by_threads.push_back(g.compute(out, threads));
    }
    for (size_t t = 1; t < by_threads.size(); ++t)
      EXPECT_EQ(by_threads[0], by_threads[t])
          << (t + 1) << " threads, " << ggml_type_name(c.type) << " " << c.i << " x " << c.j;
  }
}

// The epilogue: + bias per output column, then GELU (ggml_gelu's tanh form), in
// both splits (over b's rows and over a's rows) and with a column count that leaves
// a partial vector.
TEST(BlasMulMatEpilogue, BiasAndGeluEqualTheReference) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  // f32 weights (split over rows), f16 ones converted by the graph (more activation
  // rows than weight rows) and f16 ones converted by each thread (fewer).
  for (const auto& [type, k, i, j] : {std::tuple<ggml_type, int64_t, int64_t, int64_t>{GGML_TYPE_F32, 48, 37, 90},
                                      {GGML_TYPE_F32, 48, 90, 37},
                                      {GGML_TYPE_F16, 48, 37, 90},
                                      {GGML_TYPE_F16, 48, 90, 37}}) {
    for (bool gelu : {false, true}) {
      const std::vector<float> a = normal_values(k * i, 6, 0.3f), b = normal_values(k * j, 7),
                               bias = normal_values(i, 8);
      const std::vector<float> a_stored = as_stored(type, a, k, i);
      Graph g(4 * (k * i + k * j + i + 2 * i * j) + (1 << 20));
      ggml_tensor* bias_t = ggml_new_tensor_1d(g.ctx.get(), GGML_TYPE_F32, i);
      std::copy(bias.begin(), bias.end(), static_cast<float*>(bias_t->data));
      ggml_tensor* out = blas_mul_mat(g.ctx.get(), g.matrix(type, k, i, a), g.matrix(GGML_TYPE_F32, k, j, b), bias_t,
                                      gelu ? Activation::kGelu : Activation::kNone);
      const std::vector<float> got = g.compute(out, 2);
      double worst = 0;
      for (int64_t jj = 0; jj < j; ++jj)
        for (int64_t ii = 0; ii < i; ++ii) {
          double x = bias[ii];
          for (int64_t l = 0; l < k; ++l) x += double(a_stored[ii * k + l]) * double(b[jj * k + l]);
          if (gelu) x = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
          worst = std::max(worst, std::fabs(x - got[jj * i + ii]));
        }
      EXPECT_LT(worst, 1e-5) << ggml_type_name(type) << " i " << i << " j " << j << (gelu ? " gelu" : " bias");
    }
  }
}

// softmax(q k^T / sqrt(d)) v per head, in double.
std::vector<double> attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, int64_t D, int64_t nq, int64_t nk, int n_head) {
  const int64_t hd = D / n_head;
  std::vector<double> out(D * nq), p(nk);
  for (int h = 0; h < n_head; ++h)
    for (int64_t r = 0; r < nq; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < nk; ++c) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[r * D + h * hd + d]) * double(k[c * D + h * hd + d]);
        p[c] = dot / std::sqrt(double(hd));
        mx = std::max(mx, p[c]);
      }
      for (int64_t c = 0; c < nk; ++c) sum += p[c] = std::exp(p[c] - mx);
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t c = 0; c < nk; ++c) acc += p[c] * double(v[c * D + h * hd + d]);
        out[r * D + h * hd + d] = acc / sum;
      }
    }
  return out;
}

struct AttentionCase {
  int n_head;
  int64_t head_dim, nq, nk;
  float scale;  // of q and k: large values make peaked softmax rows, whose exps underflow
  int threads;
};

class BlasAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(BlasAttention, EqualsSoftmaxAttentionInDouble) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  const AttentionCase c = GetParam();
  const int64_t D = c.n_head * c.head_dim;
  const std::vector<float> q = normal_values(D * c.nq, 3, c.scale), k = normal_values(D * c.nk, 4, c.scale),
                           v = normal_values(D * c.nk, 5);
  Graph g(4 * D * (c.nq * 2 + c.nk * 2) + (1 << 20));
  ggml_tensor* out = blas_attention(g.ctx.get(), g.matrix(GGML_TYPE_F32, D, c.nq, q),
                                    g.matrix(GGML_TYPE_F32, D, c.nk, k), g.matrix(GGML_TYPE_F32, D, c.nk, v), c.n_head);
  const std::vector<float> got = g.compute(out, c.threads);
  const std::vector<double> want = attention_reference(q, k, v, D, c.nq, c.nk, c.n_head);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(want[i] - got[i]));
  // Measured <= 6.4e-7 (1.2e-5 with q and k scaled by 4); an exp off by 1e-5 fails.
  EXPECT_LT(worst, 2e-6 * c.scale * c.scale) << "heads " << c.n_head << " queries " << c.nq << " keys " << c.nk;
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlasAttention,
                         ::testing::Values(AttentionCase{3, 16, 200, 150, 1.0f, 2},  // blocks and lanes with tails
                                           AttentionCase{2, 64, 129, 17, 1.0f, 3},
                                           AttentionCase{1, 8, 5, 7, 1.0f, 1},      // shorter than a vector
                                           AttentionCase{4, 32, 300, 301, 4.0f, 2}  // peaked: exps down to 0
                                           ));

// blas_masked_attention over the views libllama's KV cache gives: grouped-query
// heads, keys and values in a cache of more cells than are used (strided views),
// V stored transposed or not, f16 or f32, a causal mask of -inf past each query
// (and a cell masked out in every row), queries as a permuted view; with `pad`,
// the view's last cells are masked out in every row, as libllama pads a view to
// 256 cells at least (the op attends to the cells before them alone).
struct MaskedCase {
  ggml_type type;
  bool v_trans;
  int64_t d, n_head, n_head_kv, t, n_kv;
  int threads;
  int64_t pad = 0;
};

class BlasMaskedAttention : public ::testing::TestWithParam<MaskedCase> {};

TEST_P(BlasMaskedAttention, EqualsGroupedQueryAttentionInDouble) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  const MaskedCase c = GetParam();
  const int64_t cells = c.n_kv + 9;             // the cache is larger than the view
  const int64_t n_pos0 = c.n_kv - c.pad - c.t;  // cells before the first query
  const float scale = 1.0f / std::sqrt(float(c.d));
  const std::vector<float> q = normal_values(c.d * c.n_head * c.t, 6), k = normal_values(c.d * c.n_head_kv * cells, 7),
                           v = normal_values(c.d * c.n_head_kv * cells, 8);
  Graph g(4 * (q.size() + 3 * k.size() + c.n_kv * c.t + c.d * c.n_head * c.t) + (1 << 20));
  // q as llama builds it: [d, H, T] permuted to [d, T, H].
  ggml_tensor* q3 = g.matrix(GGML_TYPE_F32, c.d * c.n_head, c.t, q);
  ggml_tensor* qv = ggml_permute(g.ctx.get(), ggml_reshape_3d(g.ctx.get(), q3, c.d, c.n_head, c.t), 0, 2, 1, 3);
  // The caches: K rows of d per cell and head ([d * Hk, cells]); V either the same
  // or transposed ([cells, d * Hk]: a row of cells per channel).
  ggml_tensor* kc = g.matrix(c.type, c.d * c.n_head_kv, cells, k);
  const size_t es = ggml_type_size(c.type);
  ggml_tensor* kv = ggml_view_3d(g.ctx.get(), kc, c.d, c.n_kv, c.n_head_kv, kc->nb[1], c.d * es, 0);
  std::vector<float> vt(v.size());  // channel-major copy for the transposed cache
  for (int64_t j = 0; j < cells; ++j)
    for (int64_t ch = 0; ch < c.d * c.n_head_kv; ++ch) vt[ch * cells + j] = v[j * c.d * c.n_head_kv + ch];
  ggml_tensor* vv;
  if (c.v_trans) {
    ggml_tensor* vc = g.matrix(c.type, cells, c.d * c.n_head_kv, vt);
    vv = ggml_view_3d(g.ctx.get(), vc, c.n_kv, c.d, c.n_head_kv, vc->nb[1], c.d * vc->nb[1], 0);
  } else {
    ggml_tensor* vc = g.matrix(c.type, c.d * c.n_head_kv, cells, v);
    vv = ggml_view_3d(g.ctx.get(), vc, c.d, c.n_kv, c.n_head_kv, vc->nb[1], c.d * es, 0);
  }
  std::vector<float> mask(c.n_kv * c.t);
  for (int64_t r = 0; r < c.t; ++r)
    for (int64_t j = 0; j < c.n_kv; ++j)
      mask[r * c.n_kv + j] = j > n_pos0 + r || j == 1 || j >= c.n_kv - c.pad ? -INFINITY : 0.0f;
  ggml_tensor* out =
      blas_masked_attention(g.ctx.get(), qv, kv, vv, c.v_trans, g.matrix(GGML_TYPE_F32, c.n_kv, c.t, mask), scale);
  ASSERT_EQ(out->ne[0], c.d * c.n_head);
  ASSERT_EQ(out->ne[1], c.t);
  const std::vector<float> got = g.compute(out, c.threads);
  const std::vector<float> ks = as_stored(c.type, k, c.d * c.n_head_kv, cells);
  const std::vector<float> vs = as_stored(c.type, v, c.d * c.n_head_kv, cells);
  double worst = 0;
  for (int64_t h = 0; h < c.n_head; ++h) {
    const int64_t hk = h / (c.n_head / c.n_head_kv);
    for (int64_t r = 0; r < c.t; ++r) {
      std::vector<double> p(c.n_kv, 0.0);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < c.n_kv; ++j) {
        if (std::isinf(mask[r * c.n_kv + j])) continue;
        double dot = 0;
        for (int64_t e = 0; e < c.d; ++e)
          dot += double(q[(r * c.n_head + h) * c.d + e]) * double(ks[(j * c.n_head_kv + hk) * c.d + e]);
        mx = std::max(mx, p[j] = dot * scale);
      }
      for (int64_t j = 0; j < c.n_kv; ++j) sum += p[j] = std::isinf(mask[r * c.n_kv + j]) ? 0.0 : std::exp(p[j] - mx);
      for (int64_t e = 0; e < c.d; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < c.n_kv; ++j) acc += p[j] * double(vs[(j * c.n_head_kv + hk) * c.d + e]);
        worst = std::max(worst, std::fabs(acc / sum - got[r * c.d * c.n_head + h * c.d + e]));
      }
    }
  }
  EXPECT_LT(worst, 2e-6) << ggml_type_name(c.type) << (c.v_trans ? " transposed V" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlasMaskedAttention,
                         ::testing::Values(MaskedCase{GGML_TYPE_F16, true, 64, 4, 2, 20, 32,
                                                      2},  // llama's default cache
                                           MaskedCase{GGML_TYPE_F16, false, 32, 3, 3, 9, 9, 3},
                                           MaskedCase{GGML_TYPE_F32, true, 16, 6, 2, 300, 310, 2},  // two query blocks
                                           MaskedCase{GGML_TYPE_F32, false, 24, 2, 1, 12, 40, 1},
                                           MaskedCase{GGML_TYPE_F16, true, 64, 4, 2, 20, 256, 2, 200},  // padded view
                                           MaskedCase{GGML_TYPE_F32, false, 16, 2, 1, 9, 64, 1, 30}),
                         [](const ::testing::TestParamInfo<MaskedCase>& info) {
                           const MaskedCase& c = info.param;
                           return std::string(ggml_type_name(c.type)) + (c.v_trans ? "_vt_" : "_v_") +
                                  std::to_string(c.t) + "x" + std::to_string(c.n_kv) + "_pad" + std::to_string(c.pad) +
                                  "_heads" + std::to_string(c.n_head) + "_" + std::to_string(c.n_head_kv);
                         });

// Several KV streams in one call (libllama's sequences without a unified cache,
// as a shared Qwen3-ASR context decodes them): each stream's rows equal a call
// on that stream alone, bit for bit, its rows placed after the previous stream's.
TEST(BlasMaskedAttention, EachStreamAttendsToItsOwnCellsAsAlone) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  constexpr int64_t d = 16, H = 4, Hk = 2, T = 11, n_kv = 24, S = 2;
  Graph g(1 << 24);
  ggml_context* c = g.ctx.get();
  auto tensor4 = [&](int64_t a, int64_t b, int64_t e, int64_t f, int seed) {
    ggml_tensor* t = ggml_new_tensor_4d(c, GGML_TYPE_F32, a, b, e, f);
    const std::vector<float> v = normal_values(a * b * e * f, seed);
    std::copy(v.begin(), v.end(), static_cast<float*>(t->data));
    return t;
  };
  ggml_tensor* q = tensor4(d, T, H, S, 1);
  ggml_tensor* k = tensor4(d, n_kv, Hk, S, 2);
  ggml_tensor* v = tensor4(d, n_kv, Hk, S, 3);
  ggml_tensor* mask = ggml_new_tensor_4d(c, GGML_TYPE_F32, n_kv, T, 1, S);
  auto* m = static_cast<float*>(mask->data);
  for (int64_t s = 0; s < S; ++s)  // each stream its own causal border
    for (int64_t r = 0; r < T; ++r)
      for (int64_t j = 0; j < n_kv; ++j) m[(s * T + r) * n_kv + j] = j > 5 + 4 * s + r ? -INFINITY : 0.0f;
  const float scale = 0.25f;
  ggml_tensor* both = blas_masked_attention(c, q, k, v, false, mask, scale);
  ASSERT_EQ(both->ne[1], T * S);
  const std::vector<float> got = g.compute(both, 2);
  for (int64_t s = 0; s < S; ++s) {
    auto stream = [&](ggml_tensor* t) {
      return ggml_view_3d(c, t, t->ne[0], t->ne[1], t->ne[2], t->nb[1], t->nb[2], s * t->nb[3]);
    };
    ggml_tensor* alone = blas_masked_attention(c, stream(q), stream(k), stream(v), false, stream(mask), scale);
    const std::vector<float> want = g.compute(alone, 2);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[static_cast<size_t>(s) * want.size() + i], want[i]) << s;
  }
}

TEST(BlasMaskedAttention, RefusesShapesItDoesNotTake) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  Graph g(1 << 20);
  ggml_context* c = g.ctx.get();
  ggml_tensor* q = ggml_new_tensor_3d(c, GGML_TYPE_F32, 16, 4, 3);
  ggml_tensor* k = ggml_new_tensor_3d(c, GGML_TYPE_F16, 16, 8, 2);
  ggml_tensor* v = ggml_new_tensor_3d(c, GGML_TYPE_F16, 16, 8, 2);
  EXPECT_THROW(blas_masked_attention(c, q, k, v, false, nullptr, 0.25f), Error);  // 3 heads over 2 KV heads
  ggml_tensor* q4 = ggml_new_tensor_3d(c, GGML_TYPE_F32, 16, 4, 4);
  EXPECT_NO_THROW(blas_masked_attention(c, q4, k, v, false, nullptr, 0.25f));
  EXPECT_THROW(blas_masked_attention(c, q4, k, v, false, ggml_new_tensor_2d(c, GGML_TYPE_F32, 7, 4), 0.25f), Error);
  EXPECT_THROW(blas_masked_attention(c, q4, ggml_new_tensor_3d(c, GGML_TYPE_F16, 8, 8, 2), v, false, nullptr, 0.25f),
               Error);
  EXPECT_THROW(blas_masked_attention(c, q4, k, v, true, nullptr, 0.25f), Error);  // v is not [n_kv, d, Hk]
  ggml_tensor* q2 = ggml_new_tensor_4d(c, GGML_TYPE_F32, 16, 4, 4, 2);            // two streams over one stream's KV
  EXPECT_THROW(blas_masked_attention(c, q2, k, v, false, nullptr, 0.25f), Error);
}

TEST(CpuKernels, NamesParseAndBadOnesAreRefusedWithTheOptionName) {
  EXPECT_EQ(parse_cpu_kernels("auto", "--cpu-kernels"), CpuKernels::kAuto);
  EXPECT_EQ(parse_cpu_kernels("ggml", "--cpu-kernels"), CpuKernels::kGgml);
  EXPECT_EQ(parse_cpu_kernels("openblas", "--cpu-kernels"), CpuKernels::kOpenBlas);
  for (CpuKernels k : {CpuKernels::kAuto, CpuKernels::kGgml, CpuKernels::kOpenBlas})
    EXPECT_EQ(parse_cpu_kernels(to_string(k), "x"), k);
  try {
    parse_cpu_kernels("mkl", "--cpu-kernels");
    FAIL() << "no error for mkl";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--cpu-kernels"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("mkl"), std::string::npos);
  }
}

TEST(CpuKernels, AutoIsOpenBlasOnTheCpuAndGgmlElsewhere) {
  ASSERT_TRUE(openblas_available()) << openblas_status();
  EXPECT_NE(openblas_status().find("OpenBLAS"), std::string::npos);
  EXPECT_EQ(resolve_cpu_kernels(CpuKernels::kAuto, true), CpuKernels::kOpenBlas);
  EXPECT_EQ(resolve_cpu_kernels(CpuKernels::kAuto, false), CpuKernels::kGgml);
  EXPECT_EQ(resolve_cpu_kernels(CpuKernels::kGgml, true), CpuKernels::kGgml);
  EXPECT_EQ(resolve_cpu_kernels(CpuKernels::kOpenBlas, true), CpuKernels::kOpenBlas);
  EXPECT_THROW(resolve_cpu_kernels(CpuKernels::kOpenBlas, false), Error);
}

}  // namespace
}  // namespace earshot::runtime

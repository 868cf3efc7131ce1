// runtime::q8_mul_mat (a Q8_0 weight's product with many activation rows on int8
// dot products) on its scalar path and, where the CPU has AVX512-VNNI, its
// AVX512-VNNI kernels, each forced in turn (runtime::ScopedKernelCap): the same
// values bit for bit on both paths and on any number of threads; every row equal
// to its lone product; against the product in double of the weight's blocks and
// the activations as the op quantises them, within f32's rounding; ggml's Q8_0
// product within the two quantisations' difference; the bias; sizes that leave
// partial panels, vectors and tiles; strided rows; one quantisation for the
// products of one input; and what it refuses.
#include "model/runtime/q8_gemm.h"

#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/cpu_isa.h"
#include "ops_test_util.h"

namespace earshot::runtime {
namespace {

using testing::normal_values;

struct Case {
  int64_t k, i, j;
};

class Q8Fixture {
 public:
  Q8Fixture(const Case& c, bool with_bias) : c_(c) {
    const size_t bytes = static_cast<size_t>(c.k * (c.i + c.j + kPad) * 8 + c.i * (c.j + 2) * 8) + (4 << 20);
    ctx_.reset(ggml_init({bytes, nullptr, false}));
    w_ = ggml_new_tensor_2d(ctx_.get(), GGML_TYPE_Q8_0, c.k, c.i);
    std::vector<float> a = normal_values(static_cast<size_t>(c.k * c.i), 11, 0.05f);
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(a.data(), w_->data, c.k * c.i);
    weights_.resize(a.size());
    ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(w_->data, weights_.data(), c.k * c.i);
    full_ = ggml_new_tensor_2d(ctx_.get(), GGML_TYPE_F32, c.k + kPad, c.j);
    std::vector<float> b = normal_values(static_cast<size_t>((c.k + kPad) * c.j), 12, 3.0f);
    std::memcpy(full_->data, b.data(), b.size() * sizeof(float));
    x_ = ggml_view_2d(ctx_.get(), full_, c.k, c.j, full_->nb[1], 0);
    if (with_bias) {
      bias_ = ggml_new_tensor_1d(ctx_.get(), GGML_TYPE_F32, c.i);
      std::vector<float> v = normal_values(static_cast<size_t>(c.i), 13);
      std::memcpy(bias_->data, v.data(), v.size() * sizeof(float));
    }
  }

  // Rows [j0, j0 + n) of the activations against the weight, on `threads` threads.
  std::vector<float> run(int threads, int64_t j0 = 0, int64_t n = -1) {
    if (n < 0) n = c_.j;
    ggml_tensor* xb = ggml_view_2d(ctx_.get(), full_, c_.k, n, full_->nb[1], j0 * full_->nb[1]);
    EXPECT_TRUE(q8_gemm_supports(w_, xb, bias_));
    ggml_tensor* out = q8_mul_mat(ctx_.get(), w_, xb, bias_);
    EXPECT_EQ(out->ne[0], c_.i);
    EXPECT_EQ(out->ne[1], n);
    return compute(out, threads, n);
  }

  std::vector<float> run_ggml() {
    ggml_tensor* out = ggml_mul_mat(ctx_.get(), w_, x_);
    if (bias_) out = ggml_add(ctx_.get(), out, bias_);
    return compute(out, 2, c_.j);
  }

  // Row j's activations as the op quantises them (its scalar path), dequantised.
  std::vector<double> activation_row(int64_t j) const {
    const float* row = static_cast<const float*>(full_->data) + j * (c_.k + kPad);
    std::vector<char> q(static_cast<size_t>(q8::quantised_row_bytes(c_.k)));
    q8::quantise_rows(CpuPath::kScalar, row, c_.k, c_.k, 0, 1, q.data());
    std::vector<double> v(static_cast<size_t>(c_.k));
    for (int64_t l = 0; l < c_.k; ++l) {
      float d;
      std::memcpy(&d, q.data() + c_.k + l / 32 * 4, 4);
      v[l] = double(static_cast<int8_t>(q[l])) * d;
    }
    return v;
  }

  double reference(int64_t i, const std::vector<double>& xj) const {
    double want = 0;
    for (int64_t l = 0; l < c_.k; ++l) want += double(weights_[i * c_.k + l]) * xj[l];
    if (bias_) want += static_cast<const float*>(bias_->data)[i];
    return want;
  }
  // The scale of row j's sum: sum |w x|, what f32 rounding is relative to.
  double magnitude(int64_t i, const std::vector<double>& xj) const {
    double m = 0;
    for (int64_t l = 0; l < c_.k; ++l) m += std::abs(double(weights_[i * c_.k + l]) * xj[l]);
    return m + (bias_ ? std::abs(static_cast<const float*>(bias_->data)[i]) : 0.0);
  }

 private:
  std::vector<float> compute(ggml_tensor* out, int threads, int64_t n) {
    ggml_cgraph* graph = ggml_new_graph(ctx_.get());
    ggml_build_forward_expand(graph, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx_.get(), graph, threads), GGML_STATUS_SUCCESS);
    const auto* p = static_cast<const float*>(out->data);
    return std::vector<float>(p, p + c_.i * n);
  }

  static constexpr int64_t kPad = 7;  // the activations are a view with a longer row stride
  Case c_;
  ggml_context_ptr ctx_;
  ggml_tensor *w_ = nullptr, *full_ = nullptr, *x_ = nullptr, *bias_ = nullptr;
  std::vector<float> weights_;
};

std::string name(const Case& c) {
  return "k=" + std::to_string(c.k) + " i=" + std::to_string(c.i) + " j=" + std::to_string(c.j);
}

// The op's paths this CPU runs: scalar always, AVX512-VNNI where it has it.
std::vector<CpuPath> paths() {
  std::vector<CpuPath> out = {CpuPath::kScalar};
  if (cpu_has(CpuPath::kAvx512Vnni)) out.push_back(CpuPath::kAvx512Vnni);
  return out;
}

class Q8MulMat : public ::testing::TestWithParam<Case> {};

TEST_P(Q8MulMat, EveryPathAndThreadCountGivesTheSameValuesWithinTheReference) {
  const Case c = GetParam();
  for (bool with_bias : {false, true}) {
    Q8Fixture f(c, with_bias);
    std::vector<float> first;
    for (CpuPath path : paths()) {
      ScopedKernelCap cap(path);
      EXPECT_EQ(q8_gemm_available(), path == CpuPath::kAvx512Vnni);
      for (int threads : {1, 2, 3}) {
        const std::vector<float> got = f.run(threads);
        if (first.empty()) {
          first = got;
          for (int64_t j = 0; j < c.j; ++j) {
            const std::vector<double> xj = f.activation_row(j);
            for (int64_t i = 0; i < c.i; ++i) {
              const double want = f.reference(i, xj);
              ASSERT_NEAR(got[j * c.i + i], want, 1e-6 * f.magnitude(i, xj) + 1e-6)
                  << name(c) << " bias " << with_bias << " i=" << i << " j=" << j;
            }
          }
        }
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
            << name(c) << " bias " << with_bias << " path " << to_string(path) << " threads " << threads;
      }
    }
  }
}

TEST_P(Q8MulMat, EachRowEqualsItsLoneProduct) {
  const Case c = GetParam();
  Q8Fixture f(c, true);
  for (CpuPath path : paths()) {
    ScopedKernelCap cap(path);
    const std::vector<float> all = f.run(2);
    for (int64_t j = 0; j < c.j; j += std::max<int64_t>(1, c.j / 3)) {
      const std::vector<float> lone = f.run(1, j, 1);
      ASSERT_EQ(std::memcmp(lone.data(), all.data() + j * c.i, lone.size() * sizeof(float)), 0)
          << name(c) << " row " << j << " path " << to_string(path);
    }
  }
}

TEST_P(Q8MulMat, MatchesGgmlsQ8ProductWithinTheQuantisations) {
  const Case c = GetParam();
  Q8Fixture f(c, true);
  const std::vector<float> ours = f.run(2), ggml = f.run_ggml();
  for (int64_t j = 0; j < c.j; ++j) {
    const std::vector<double> xj = f.activation_row(j);
    for (int64_t i = 0; i < c.i; ++i) {
      // ggml rounds each block's d to f16 (a relative 2^-11) and quantises the
      // activations its own way: the difference is bounded by the sum's magnitude.
      ASSERT_NEAR(ours[j * c.i + i], ggml[j * c.i + i], 2e-3 * f.magnitude(i, xj) + 1e-5)
          << name(c) << " i=" << i << " j=" << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Q8MulMat,
                         ::testing::Values(Case{32, 1, 1}, Case{64, 17, 7}, Case{96, 33, 13}, Case{256, 64, 6},
                                           Case{1024, 100, 19}, Case{512, 15, 40}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return "k" + std::to_string(c.k) + "_i" + std::to_string(c.i) + "_j" + std::to_string(c.j);
                         });

// Q8_0 weight [k, i] of N(0, 0.05) values from `seed`.
ggml_tensor* q8_weight(ggml_context* ctx, int64_t k, int64_t i, uint32_t seed) {
  ggml_tensor* w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, k, i);
  const std::vector<float> v = normal_values(static_cast<size_t>(k * i), seed, 0.05f);
  ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(v.data(), w->data, k * i);
  return w;
}

std::vector<float> computed(ggml_context* ctx, ggml_tensor* out) {
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);
  EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, graph, 2), GGML_STATUS_SUCCESS);
  const auto* p = static_cast<const float*>(out->data);
  return std::vector<float>(p, p + ggml_nelements(out));
}

// The products of one input (a layer's query, key and value) quantise it once:
// the second takes the first's node, and its values are those of a product built
// alone. A context reset for the next graph quantises again (the earlier node is
// past the memory in use), as does another input.
TEST(Q8MulMatTest, ProductsOfOneInputShareItsQuantisation) {
  const int64_t k = 64, j = 20;
  ggml_context_ptr ctx(ggml_init({8 << 20, nullptr, false}));
  ggml_tensor* w1 = q8_weight(ctx.get(), k, 48, 21);
  ggml_tensor* w2 = q8_weight(ctx.get(), k, 32, 22);
  ggml_tensor* x = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, k, j);
  const std::vector<float> xv = normal_values(static_cast<size_t>(k * j), 23);
  std::memcpy(x->data, xv.data(), xv.size() * sizeof(float));
  ggml_tensor* y1 = q8_mul_mat(ctx.get(), w1, x);
  ggml_tensor* y2 = q8_mul_mat(ctx.get(), w2, x);
  EXPECT_EQ(y1->src[1], y2->src[1]);
  const std::vector<float> both1 = computed(ctx.get(), y1), both2 = computed(ctx.get(), y2);

  ggml_context_ptr alone(ggml_init({8 << 20, nullptr, false}));
  ggml_tensor* x_alone = ggml_dup_tensor(alone.get(), x);
  std::memcpy(x_alone->data, xv.data(), xv.size() * sizeof(float));
  ggml_tensor* w2_alone = ggml_dup_tensor(alone.get(), w2);
  std::memcpy(w2_alone->data, w2->data, ggml_nbytes(w2));
  EXPECT_EQ(computed(alone.get(), q8_mul_mat(alone.get(), w2_alone, x_alone)), both2);

  ggml_tensor* other = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, k, j);
  std::memcpy(other->data, xv.data(), xv.size() * sizeof(float));
  ggml_tensor* y3 = q8_mul_mat(ctx.get(), w1, other);
  EXPECT_NE(y3->src[1], y1->src[1]);
  EXPECT_EQ(computed(ctx.get(), y3), both1);

  // The same build again in the reset context (as libllama builds each graph):
  // the input at the same address as the last call's, so only where its
  // quantisation lies tells the earlier build's node from one of this build.
  ggml_tensor* stale = q8_mul_mat(ctx.get(), w1, x)->src[1];
  ggml_reset(ctx.get());
  ggml_tensor* w1_again = q8_weight(ctx.get(), k, 48, 21);
  q8_weight(ctx.get(), k, 32, 22);
  ggml_tensor* x_again = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, k, j);
  std::memcpy(x_again->data, xv.data(), xv.size() * sizeof(float));
  ASSERT_EQ(x_again, x) << "the reset context lays the tensors out as before";
  // Tensors of this build past the stale node's address: the memory in use covers it.
  while (static_cast<const char*>(ggml_get_mem_buffer(ctx.get())) + ggml_used_mem(ctx.get()) <=
         reinterpret_cast<const char*>(stale)) {
    ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
  }
  ggml_tensor* y = q8_mul_mat(ctx.get(), w1_again, x_again);
  EXPECT_EQ(y->src[1]->src[0], x_again);
  EXPECT_EQ(y->src[1]->op, GGML_OP_CUSTOM);
  EXPECT_EQ(computed(ctx.get(), y), both1);
}

TEST(Q8MulMatTest, RefusesWhatItCannotMultiply) {
  ggml_context_ptr ctx(ggml_init({1 << 20, nullptr, true}));
  ggml_tensor* f16 = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F16, 64, 8);
  ggml_tensor* q8 = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q8_0, 64, 8);
  ggml_tensor* x = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 64, 4);
  ggml_tensor* x_short = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 32, 4);
  ggml_tensor* x_f16 = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F16, 64, 4);
  ggml_tensor* bias_wrong = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 7);
  ggml_tensor* x16 = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 64, kQ8GemmMinRows);
  EXPECT_TRUE(q8_gemm_supports(q8, x));
  EXPECT_FALSE(q8_gemm_takes(q8, x));  // too few rows to gain by it
  EXPECT_TRUE(q8_gemm_takes(q8, x16));
  EXPECT_FALSE(q8_gemm_takes(f16, x16));
  EXPECT_FALSE(q8_gemm_supports(f16, x));
  EXPECT_FALSE(q8_gemm_supports(q8, x_short));
  EXPECT_FALSE(q8_gemm_supports(q8, x_f16));
  EXPECT_FALSE(q8_gemm_supports(q8, x, bias_wrong));
  EXPECT_THROW(q8_mul_mat(ctx.get(), f16, x), Error);
}

}  // namespace
}  // namespace earshot::runtime

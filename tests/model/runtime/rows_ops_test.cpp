// runtime::rows_mul_mat (a weight's product with a step's few activation rows) on
// every kernel path this CPU runs, each forced in turn (runtime::ScopedKernelCap):
// against the product in double from the same inputs (F16 and F32 weights exact,
// Q8_0, Q4_K and Q6_K from the weight's and the activations' own blocks), within the f32
// accumulation's rounding; every output of a many-row product equal bit for bit
// to its row's lone product, and to the same product on other thread counts (a
// batched step equals its lone steps); ggml's own product within its rounding;
// the bias; lengths and row counts that leave partial vectors, tiles and blocks of
// pairs; strided rows; and what it refuses.
#include "model/runtime/rows_ops.h"

#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/cpu_isa.h"
#include "model/runtime/rows_kernels.h"
#include "ops_test_util.h"

namespace earshot::runtime {
namespace {

using testing::normal_values;

struct Case {
  ggml_type type;
  int64_t k, i, j;
};

// A product computed on ggml's CPU backend with `threads` threads: [i][j] as out[j * I + i].
struct Product {
  std::vector<float> out;
};

class RowsFixture {
 public:
  RowsFixture(const Case& c, bool with_bias) : c_(c) {
    const size_t bytes = static_cast<size_t>(c.k * (c.i + c.j + kPad) * 8 + c.i * (c.j + 2) * 4) + (4 << 20);
    ctx_.reset(ggml_init({bytes, nullptr, false}));
    w_ = ggml_new_tensor_2d(ctx_.get(), c.type, c.k, c.i);
    std::vector<float> a = normal_values(static_cast<size_t>(c.k * c.i), 1);
    if (c.type == GGML_TYPE_F32) {
      std::memcpy(w_->data, a.data(), a.size() * sizeof(float));
    } else {
      ggml_get_type_traits_cpu(c.type)->from_float(a.data(), w_->data, c.k * c.i);
    }
    weights_ = a;  // the values the weight holds
    if (c.type != GGML_TYPE_F32) ggml_get_type_traits(c.type)->to_float(w_->data, weights_.data(), c.k * c.i);
    full_ = ggml_new_tensor_2d(ctx_.get(), GGML_TYPE_F32, c.k + kPad, c.j);
    std::vector<float> b = normal_values(static_cast<size_t>((c.k + kPad) * c.j), 2);
    std::memcpy(full_->data, b.data(), b.size() * sizeof(float));
    x_ = ggml_view_2d(ctx_.get(), full_, c.k, c.j, full_->nb[1], 0);
    if (with_bias) {
      bias_ = ggml_new_tensor_1d(ctx_.get(), GGML_TYPE_F32, c.i);
      std::vector<float> v = normal_values(static_cast<size_t>(c.i), 3);
      std::memcpy(bias_->data, v.data(), v.size() * sizeof(float));
    }
  }

  // Rows [j0, j0 + n) of the activations against the weight, on `threads` threads.
  std::vector<float> run(int threads, int64_t j0 = 0, int64_t n = -1) {
    if (n < 0) n = c_.j;
    ggml_tensor* xb = ggml_view_2d(ctx_.get(), full_, c_.k, n, full_->nb[1], j0 * full_->nb[1]);
    EXPECT_TRUE(rows_supports(w_, xb, bias_));
    ggml_tensor* out = rows_mul_mat(ctx_.get(), w_, xb, bias_);
    EXPECT_EQ(out->ne[0], c_.i);
    EXPECT_EQ(out->ne[1], n);
    ggml_cgraph* graph = ggml_new_graph(ctx_.get());
    ggml_build_forward_expand(graph, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx_.get(), graph, threads), GGML_STATUS_SUCCESS);
    const auto* p = static_cast<const float*>(out->data);
    return std::vector<float>(p, p + c_.i * n);
  }

  // ggml's own product of the same operands (+ bias).
  std::vector<float> run_ggml() {
    ggml_tensor* out = ggml_mul_mat(ctx_.get(), w_, x_);
    if (bias_) out = ggml_add(ctx_.get(), out, bias_);
    ggml_cgraph* graph = ggml_new_graph(ctx_.get());
    ggml_build_forward_expand(graph, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx_.get(), graph, 2), GGML_STATUS_SUCCESS);
    const auto* p = static_cast<const float*>(out->data);
    return std::vector<float>(p, p + c_.i * c_.j);
  }

  // The activation rows as the product sees them: f32 as given, or (Q8_0) each
  // row quantised to Q8_0 blocks as ggml quantises it and read back.
  std::vector<float> activation_row(int64_t j) const {
    const float* row = static_cast<const float*>(full_->data) + j * (c_.k + kPad);
    std::vector<float> v(row, row + c_.k);
    if (c_.type == GGML_TYPE_Q8_0 || c_.type == GGML_TYPE_Q4_K || c_.type == GGML_TYPE_Q6_K) {
      // Q4_K and Q6_K: the activations go to Q8_K, as ggml's products quantise them.
      const ggml_type act = c_.type == GGML_TYPE_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q8_K;
      std::vector<char> blocks(ggml_row_size(act, c_.k));
      ggml_get_type_traits_cpu(act)->from_float(v.data(), blocks.data(), c_.k);
      if (act == GGML_TYPE_Q8_0) {
        ggml_get_type_traits(act)->to_float(blocks.data(), v.data(), c_.k);
      } else {
        // ggml has no to_float for Q8_K: block_q8_K is f32 d, 256 int8, 16 int16 sums.
        const size_t block = ggml_row_size(act, 256);
        for (int64_t b = 0; b < c_.k / 256; ++b) {
          float d;
          std::memcpy(&d, blocks.data() + b * block, 4);
          const auto* q = reinterpret_cast<const int8_t*>(blocks.data() + b * block + 4);
          for (int l = 0; l < 256; ++l) v[static_cast<size_t>(b * 256 + l)] = d * q[l];
        }
      }
    }
    return v;
  }

  double reference(int64_t i, const std::vector<float>& xj) const {
    double want = 0;
    for (int64_t l = 0; l < c_.k; ++l) want += double(weights_[i * c_.k + l]) * double(xj[l]);
    if (bias_) want += static_cast<const float*>(bias_->data)[i];
    return want;
  }

 private:
  static constexpr int64_t kPad = 5;  // the activations are a view with a longer row stride
  Case c_;
  ggml_context_ptr ctx_;
  ggml_tensor *w_ = nullptr, *full_ = nullptr, *x_ = nullptr, *bias_ = nullptr;
  std::vector<float> weights_;
};

std::string name(const Case& c) {
  return std::string(ggml_type_name(c.type)) + " k=" + std::to_string(c.k) + " i=" + std::to_string(c.i) +
         " j=" + std::to_string(c.j);
}

class RowsMulMat : public ::testing::TestWithParam<Case> {};

// Every path this CPU runs, and where it has both encodings of the 256-bit int8
// dot products, the EVEX one too (what a CPU with AVX512-VNNI but not AVX-VNNI runs).
struct PathChoice {
  CpuPath path;
  bool evex = false;
  std::string name() const { return std::string(to_string(path)) + (evex ? " (EVEX)" : ""); }
};
std::vector<PathChoice> path_choices() {
  std::vector<PathChoice> out;
  for (CpuPath p : cpu_paths()) {
    out.push_back({p, false});
    if (p == CpuPath::kAvx2Vnni && cpu_has_avx_vnni() && cpu_has(CpuPath::kAvx512Vnni)) out.push_back({p, true});
  }
  return out;
}

struct ScopedChoice {
  explicit ScopedChoice(const PathChoice& c) : cap(c.path), evex(rows::use_evex_vnni(c.evex)) {}
  ~ScopedChoice() { rows::use_evex_vnni(evex); }
  ScopedKernelCap cap;
  bool evex;
};

TEST_P(RowsMulMat, EveryPathEqualsTheProductInDouble) {
  const Case c = GetParam();
  for (const PathChoice& choice : path_choices()) {
    ScopedChoice forced(choice);
    const CpuPath path = choice.path;
    ASSERT_EQ(kernel_path(), path);
    for (bool bias : {false, true}) {
      RowsFixture f(c, bias);
      const std::vector<float> got = f.run(2);
      double worst = 0;
      for (int64_t j = 0; j < c.j; ++j) {
        const std::vector<float> xj = f.activation_row(j);
        for (int64_t i = 0; i < c.i; ++i) worst = std::max(worst, std::fabs(f.reference(i, xj) - got[j * c.i + i]));
      }
      // f32 accumulation over k terms of unit variance (Q8_0: the weight's and the
      // activations' values are the blocks' own, so only the accumulation rounds).
      EXPECT_LT(worst, 2e-6 * c.k) << name(c) << " on " << choice.name() << (bias ? " with bias" : "");
    }
  }
}

TEST_P(RowsMulMat, EachRowEqualsItsLoneProductOnAnyThreadsBitForBit) {
  const Case c = GetParam();
  for (const PathChoice& choice : path_choices()) {
    ScopedChoice forced(choice);
    const std::string path = choice.name();
    RowsFixture f(c, true);
    const std::vector<float> all = f.run(2);
    EXPECT_EQ(f.run(1), all) << name(c) << " on " << path << ": 1 thread";
    EXPECT_EQ(f.run(3), all) << name(c) << " on " << path << ": 3 threads";
    for (int64_t j : {int64_t{0}, c.j - 1}) {  // the first and last tiles' rows
      const std::vector<float> lone = f.run(2, j, 1);
      EXPECT_TRUE(std::equal(lone.begin(), lone.end(), all.begin() + j * c.i))
          << name(c) << " on " << path << ": row " << j << " alone";
    }
    if (c.j > 2) {
      const std::vector<float> tail = f.run(2, 1, c.j - 1);  // the rows in other places of the tiles
      EXPECT_TRUE(std::equal(tail.begin(), tail.end(), all.begin() + c.i)) << name(c) << " on " << path;
    }
  }
}

TEST_P(RowsMulMat, AgreesWithGgmlsProduct) {
  const Case c = GetParam();
  RowsFixture f(c, true);
  const std::vector<float> ours = f.run(2), theirs = f.run_ggml();
  double worst = 0;
  for (size_t n = 0; n < ours.size(); ++n) worst = std::max(worst, double(std::fabs(ours[n] - theirs[n])));
  // ggml rounds F16 products' activations to f16 (~5e-4 relative each); Q8_0 and
  // F32 differ by the order of the f32 sums.
  const double tolerance = c.type == GGML_TYPE_F16 ? 2e-3 * std::sqrt(double(c.k)) : 2e-6 * c.k;
  EXPECT_LT(worst, tolerance) << name(c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowsMulMat,
                         ::testing::Values(Case{GGML_TYPE_F16, 384, 64, 1},    // a decoder step
                                           Case{GGML_TYPE_F16, 1000, 67, 3},   // a partial vector, partial tiles
                                           Case{GGML_TYPE_F16, 19, 9, 5},      // fewer rows than 16 a thread
                                           Case{GGML_TYPE_F16, 1024, 70, 14},  // several activation chunks
                                           Case{GGML_TYPE_F16, 250, 45, 33},   // a batch of streams' chunks
                                           Case{GGML_TYPE_F32, 70, 37, 2}, Case{GGML_TYPE_F32, 7, 5, 4},
                                           Case{GGML_TYPE_F32, 513, 100, 9},
                                           Case{GGML_TYPE_Q8_0, 1024, 64, 1},  // whole pairs of blocks
                                           Case{GGML_TYPE_Q8_0, 96, 37, 2},    // an odd number of blocks
                                           Case{GGML_TYPE_Q8_0, 32, 11, 7},    // one block
                                           Case{GGML_TYPE_Q8_0, 1024, 40, 13}, Case{GGML_TYPE_Q8_0, 160, 50, 40},
                                           Case{GGML_TYPE_Q4_K, 256, 16, 1},   // one super-block
                                           Case{GGML_TYPE_Q4_K, 1024, 37, 5},  // partial tiles of rows
                                           Case{GGML_TYPE_Q4_K, 3072, 64, 8},  // Voxtral's width
                                           Case{GGML_TYPE_Q4_K, 512, 50, 13},
                                           Case{GGML_TYPE_Q6_K, 256, 16, 1},   // one super-block
                                           Case{GGML_TYPE_Q6_K, 1024, 37, 5},  // partial tiles of rows
                                           Case{GGML_TYPE_Q6_K, 3072, 64, 8},  // Voxtral's width
                                           Case{GGML_TYPE_Q6_K, 512, 50, 13}));

TEST(RowsMulMat, RefusesWhatItDoesNotTake) {
  const ggml_init_params params{1 << 20, nullptr, false};
  ggml_context_ptr ctx(ggml_init(params));
  ggml_context* c = ctx.get();
  ggml_tensor* w = ggml_new_tensor_2d(c, GGML_TYPE_F16, 64, 8);
  ggml_tensor* x = ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 3);
  EXPECT_TRUE(rows_supports(w, x));
  EXPECT_FALSE(rows_supports(w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 32, 1)));   // lengths differ
  EXPECT_FALSE(rows_supports(w, ggml_new_tensor_2d(c, GGML_TYPE_F16, 64, 1)));   // f16 activations
  EXPECT_FALSE(rows_supports(ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, 64, 8), x));  // another quantisation
  EXPECT_TRUE(
      rows_supports(ggml_new_tensor_2d(c, GGML_TYPE_Q4_K, 256, 8), ggml_new_tensor_2d(c, GGML_TYPE_F32, 256, 2)));
  EXPECT_TRUE(
      rows_supports(ggml_new_tensor_2d(c, GGML_TYPE_Q6_K, 256, 8), ggml_new_tensor_2d(c, GGML_TYPE_F32, 256, 2)));
  EXPECT_FALSE(rows_supports(w, ggml_new_tensor_3d(c, GGML_TYPE_F32, 64, 1, 2)));  // not 2-D
  EXPECT_FALSE(rows_supports(w, x, ggml_new_tensor_1d(c, GGML_TYPE_F32, 7)));      // a bias of another length
  try {
    rows_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 32, 2));
    ADD_FAILURE() << "rows of another length were taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(CpuIsa, PathsNamesAndCaps) {
  const std::vector<CpuPath> paths = cpu_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), CpuPath::kScalar);
  EXPECT_EQ(kernel_path(), paths.back());  // uncapped: the best this CPU has
  for (CpuPath p : paths) {
    EXPECT_EQ(parse_cpu_path(to_string(p), "--x"), p);
    ScopedKernelCap cap(p);
    EXPECT_EQ(kernel_path(), p);
  }
  EXPECT_EQ(kernel_path(), paths.back());  // the cap is lifted again
  try {
    parse_cpu_path("sse", "--cpu-path");
    ADD_FAILURE() << "sse parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--cpu-path"), std::string::npos);
  }
  EXPECT_FALSE(describe_cpu().empty());
}

}  // namespace
}  // namespace earshot::runtime

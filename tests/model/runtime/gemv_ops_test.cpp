// runtime::gemv_mul_mat (a few activation rows against an F16 or F32 weight,
// streamed once) against the product in double from the same inputs, on the CPU
// backend: every row count it takes, row counts that leave partial groups of
// weight rows, lengths that leave a partial vector, 1 to 3 threads, strided rows;
// and what it refuses.
#include "model/runtime/gemv_ops.h"

#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "ops_test_util.h"

namespace earshot::runtime {
namespace {

using testing::normal_values;

struct GemvCase {
  ggml_type type;
  int64_t k, i, j;
  int threads;
};

class GemvMulMat : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvMulMat, EqualsTheProductInDouble) {
  const GemvCase c = GetParam();
  const int64_t pad = 5;  // b's rows are a view with a longer stride
  std::vector<float> a = normal_values(c.k * c.i, 1), b = normal_values((c.k + pad) * c.j, 2);
  const ggml_init_params params{size_t(c.k * (c.i + c.j + pad) * 4 + c.i * c.j * 4) + (1 << 20), nullptr, false};
  ggml_context_ptr ctx(ggml_init(params));
  ggml_tensor* wa = ggml_new_tensor_2d(ctx.get(), c.type, c.k, c.i);
  if (c.type == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(a.data(), static_cast<ggml_fp16_t*>(wa->data), c.k * c.i);
    for (int64_t n = 0; n < c.k * c.i; ++n) a[n] = ggml_fp16_to_fp32(static_cast<ggml_fp16_t*>(wa->data)[n]);
  } else {
    std::copy(a.begin(), a.end(), static_cast<float*>(wa->data));
  }
  ggml_tensor* full = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, c.k + pad, c.j);
  std::copy(b.begin(), b.end(), static_cast<float*>(full->data));
  ggml_tensor* xb = ggml_view_2d(ctx.get(), full, c.k, c.j, full->nb[1], 0);
  ASSERT_TRUE(gemv_supports(wa, xb));
  ggml_tensor* out = gemv_mul_mat(ctx.get(), wa, xb);
  ASSERT_EQ(out->ne[0], c.i);
  ASSERT_EQ(out->ne[1], c.j);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, out);
  ASSERT_EQ(ggml_graph_compute_with_ctx(ctx.get(), graph, c.threads), GGML_STATUS_SUCCESS);
  const auto* got = static_cast<const float*>(out->data);
  double worst = 0;
  for (int64_t j = 0; j < c.j; ++j)
    for (int64_t i = 0; i < c.i; ++i) {
      double want = 0;
      for (int64_t l = 0; l < c.k; ++l) want += double(a[i * c.k + l]) * double(b[j * (c.k + pad) + l]);
      worst = std::max(worst, std::fabs(want - got[j * c.i + i]));
    }
  // f32 accumulation over k terms of unit variance; the activations are not rounded
  // to f16 (ggml's F16 product would be off by ~1e-3 sqrt(k)).
  EXPECT_LT(worst, 1e-5 * std::sqrt(double(c.k))) << ggml_type_name(c.type) << " j=" << c.j;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemvMulMat,
                         ::testing::Values(GemvCase{GGML_TYPE_F16, 1024, 64, 1, 2},  // a step
                                           GemvCase{GGML_TYPE_F16, 1000, 67, 1, 3},  // partial vector and group
                                           GemvCase{GGML_TYPE_F16, 96, 37, 2, 2}, GemvCase{GGML_TYPE_F16, 40, 21, 3, 1},
                                           GemvCase{GGML_TYPE_F16, 333, 50, 4, 2},
                                           GemvCase{GGML_TYPE_F16, 19, 9, 5, 3},  // fewer rows than 16 a thread
                                           GemvCase{GGML_TYPE_F16, 128, 33, 6, 2},
                                           GemvCase{GGML_TYPE_F16, 250, 45, 7, 2},
                                           GemvCase{GGML_TYPE_F32, 70, 37, 1, 2}, GemvCase{GGML_TYPE_F32, 7, 5, 4, 1},
                                           GemvCase{GGML_TYPE_F32, 513, 100, 7, 3}));

TEST(GemvMulMat, RefusesWhatItDoesNotTake) {
  const ggml_init_params params{1 << 20, nullptr, false};
  ggml_context_ptr ctx(ggml_init(params));
  ggml_context* c = ctx.get();
  ggml_tensor* w = ggml_new_tensor_2d(c, GGML_TYPE_F16, 64, 8);
  EXPECT_FALSE(gemv_supports(w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, kGemvMaxRows + 1)));  // sgemm's
  EXPECT_FALSE(gemv_supports(w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 32, 1)));                 // lengths differ
  EXPECT_FALSE(gemv_supports(w, ggml_new_tensor_2d(c, GGML_TYPE_F16, 64, 1)));                 // f16 activations
  EXPECT_FALSE(
      gemv_supports(ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, 64, 8), ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 1)));
  EXPECT_FALSE(gemv_supports(w, ggml_new_tensor_3d(c, GGML_TYPE_F32, 64, 1, 2)));  // not 2-D
  try {
    gemv_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 8));
    ADD_FAILURE() << "eight rows were taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

}  // namespace
}  // namespace earshot::runtime

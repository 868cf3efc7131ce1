// earshot's patches to ggml's CPU ops (cmake/ggml/patches/cpu-im2col-gelu-erf.patch):
// im2col shares its output rows among the threads (upstream interleaved them over
// input channels) and gives the same columns for any thread count, in f32 and f16;
// GELU with the exact erf, vectorised through erfc, stays within a few millionths
// (relative; the far negative tail a little more) of the exact value over the whole
// range, for contiguous tensors and rows of any length, and keeps infinities and NaN.
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace {

// Builds out = build(ctx, in) for an f32 input of shape `shape` holding `values`,
// computes it on the CPU backend with `threads` threads and returns out as f32.
std::vector<float> compute(std::array<int64_t, 4> shape, const std::vector<float>& values, int threads,
                           const std::function<ggml_tensor*(ggml_context*, ggml_tensor*)>& build) {
  ggml_init_params params{64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context_ptr ctx(ggml_init(params));
  ggml_tensor* in = ggml_new_tensor_4d(ctx.get(), GGML_TYPE_F32, shape[0], shape[1], shape[2], shape[3]);
  ggml_tensor* out = build(ctx.get(), in);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, out);
  ggml_backend_ptr backend(ggml_backend_cpu_init());
  ggml_backend_cpu_set_n_threads(backend.get(), threads);
  ggml_backend_buffer_ptr buffer(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
  EXPECT_EQ(values.size(), static_cast<size_t>(ggml_nelements(in)));
  ggml_backend_tensor_set(in, values.data(), 0, values.size() * sizeof(float));
  EXPECT_EQ(ggml_backend_graph_compute(backend.get(), graph), GGML_STATUS_SUCCESS);
  std::vector<float> result(static_cast<size_t>(ggml_nelements(out)));
  if (out->type == GGML_TYPE_F16) {
    std::vector<ggml_fp16_t> half(result.size());
    ggml_backend_tensor_get(out, half.data(), 0, half.size() * sizeof(ggml_fp16_t));
    for (size_t i = 0; i < half.size(); ++i) result[i] = ggml_fp16_to_fp32(half[i]);
  } else {
    ggml_backend_tensor_get(out, result.data(), 0, result.size() * sizeof(float));
  }
  return result;
}

double exact_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

// Relative: 4e-6, plus the f32 rounding of the exponent -x^2 / 2 (about 6e-8 of it)
// in the far negative tail; absolute below 1e-40 (denormals).
double tolerance(double x, double exact) { return (4e-6 + 1e-7 * x * x) * std::abs(exact) + 1e-40; }

TEST(GeluErf, WithinAFewMillionthsOfTheExactValueEverywhere) {
  std::vector<float> x;
  for (int i = -400000; i <= 400000; ++i) x.push_back(static_cast<float>(i) * 5e-5f);  // [-20, 20]
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  while (x.size() % 64 != 0) x.push_back(normal(rng));
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(threads);
    const std::vector<float> y = compute({static_cast<int64_t>(x.size()), 1, 1, 1}, x, threads,
                                         [](ggml_context* ctx, ggml_tensor* in) { return ggml_gelu_erf(ctx, in); });
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = exact_gelu(x[i]);
      const double err = std::abs(y[i] - exact) / (std::abs(exact) + 1e-30);
      if (err > worst) worst = err;
      ASSERT_LE(std::abs(y[i] - exact), tolerance(x[i], exact)) << "x = " << x[i] << ": " << y[i];
    }
    RecordProperty("worst_relative_error_x1e9", static_cast<int>(worst * 1e9));
  }
}

TEST(GeluErf, RowsOfAnyLengthAndStridedRowsGiveTheSameValues) {
  // Rows of 13 and 25 values (a conv stem's), contiguous (one array for the threads)
  // and as a strided view (row by row): each value as the lone array's.
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t row : {13, 25, 50}) {
    SCOPED_TRACE(row);
    std::vector<float> x(static_cast<size_t>(row * 2 * 37));
    for (float& v : x) v = normal(rng);
    const std::vector<float> whole =
        compute({row * 2, 37, 1, 1}, x, 2, [](ggml_context* ctx, ggml_tensor* in) { return ggml_gelu_erf(ctx, in); });
    const std::vector<float> strided = compute({row * 2, 37, 1, 1}, x, 3, [row](ggml_context* ctx, ggml_tensor* in) {
      // the first `row` values of each row: not contiguous
      return ggml_cont(ctx, ggml_gelu_erf(ctx, ggml_view_2d(ctx, in, row, 37, in->nb[1], 0)));
    });
    for (int64_t r = 0; r < 37; ++r) {
      for (int64_t i = 0; i < row; ++i) {
        const size_t at = static_cast<size_t>(r * row * 2 + i);
        EXPECT_NEAR(strided[static_cast<size_t>(r * row + i)], whole[at], tolerance(x[at], whole[at]));
        EXPECT_NEAR(whole[at], exact_gelu(x[at]), tolerance(x[at], exact_gelu(x[at])));
      }
    }
  }
}

TEST(GeluErf, KeepsInfinitiesAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {inf, -inf, std::nanf(""), 0.0f, -0.0f, 1e-30f, -1e-30f, 30.0f, -30.0f};
  x.resize(64, 1.0f);  // vector lanes and the scalar tail alike
  for (size_t n : {x.size(), size_t{9}}) {
    const std::vector<float> in(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    const std::vector<float> y = compute({static_cast<int64_t>(n), 1, 1, 1}, in, 1,
                                         [](ggml_context* ctx, ggml_tensor* t) { return ggml_gelu_erf(ctx, t); });
    EXPECT_EQ(y[0], inf);
    EXPECT_LE(std::abs(y[1]), 1e-30f);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_EQ(y[4], 0.0f);
    EXPECT_NEAR(y[5], 0.5e-30f, 1e-36f);
    EXPECT_NEAR(y[6], -0.5e-30f, 1e-36f);
    EXPECT_EQ(y[7], 30.0f);
    EXPECT_LE(std::abs(y[8]), 1e-30f);
  }
}

// im2col's columns for a 3x3 stride-2 padded conv (a Qwen3-ASR stem's), computed
// directly: out[(n, oh, ow)][(c, kh, kw)].
std::vector<float> direct_im2col(const std::vector<float>& x, int64_t w, int64_t h, int64_t c, int64_t n, int64_t ow,
                                 int64_t oh) {
  std::vector<float> out;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo)
        for (int64_t ic = 0; ic < c; ++ic)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t iy = 2 * y + kh - 1, ix = 2 * xo + kw - 1;
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
              out.push_back(inside ? x[static_cast<size_t>(((in * c + ic) * h + iy) * w + ix)] : 0.0f);
            }
  return out;
}

TEST(Im2col, AnyThreadCountGivesTheDirectColumnsInF32AndF16) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t channels : {1, 3, 8}) {  // one channel: upstream ran it on one thread
    SCOPED_TRACE(channels);
    const int64_t w = 50, h = 64, n = 2, ow = 25, oh = 32;
    std::vector<float> x(static_cast<size_t>(w * h * channels * n));
    for (float& v : x) v = normal(rng);
    const std::vector<float> expected = direct_im2col(x, w, h, channels, n, ow, oh);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
      for (int threads : {1, 2, 3, 5}) {
        SCOPED_TRACE(testing::Message() << ggml_type_name(type) << ", " << threads << " threads");
        const std::vector<float> got =
            compute({w, h, channels, n}, x, threads, [channels, type](ggml_context* ctx, ggml_tensor* in) {
              ggml_tensor* kernel = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 3, 3, channels, 4);
              return ggml_im2col(ctx, kernel, in, 2, 2, 1, 1, 1, 1, true, type);
            });
        ASSERT_EQ(got.size(), expected.size());
        for (size_t i = 0; i < got.size(); ++i) {
          const float want = type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(expected[i])) : expected[i];
          ASSERT_EQ(got[i], want) << "column value " << i;
        }
      }
    }
  }
}

}  // namespace

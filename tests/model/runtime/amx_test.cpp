// Quantised products on ggml's AMX kernels (runtime/amx.h): weights placed in the
// AMX buffer by ModelWeights::load give what ggml's ordinary kernels give for the
// same quantised weights (the same integer products per block, f32 sums in another
// order), for 2-D and 3-D activations and one row; weights the kernels
// cannot take stay in the ordinary buffer; nothing reads an AMX weight but the
// product. On a CPU without AMX the same tests check that nothing goes there.
#include "model/runtime/amx.h"

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/openblas_ops.h"
#include "model/runtime/weights.h"

namespace earshot::runtime {
namespace {

// A quantised K x N weight "w" (and an f32 vector "b"), as a file's bytes.
struct QuantisedWeight {
  int64_t k, n;
  ggml_type type;
  std::vector<uint8_t> bytes;  // the weight, then the vector
  std::vector<TensorPlacement> placements;

  QuantisedWeight(int64_t k_, int64_t n_, ggml_type type_, uint32_t seed) : k(k_), n(n_), type(type_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(k * n));
    for (float& v : values) v = normal(rng);
    bytes.resize(ggml_row_size(type, k) * n);
    ggml_quantize_chunk(type, values.data(), bytes.data(), 0, n, k, nullptr);
    const uint64_t vector_offset = bytes.size();
    bytes.resize(bytes.size() + k * sizeof(float), 0);
    placements.push_back({{"w", type, 2, {k, n, 1, 1}}, 0});
    placements.push_back({{"b", GGML_TYPE_F32, 1, {k, 1, 1, 1}}, vector_offset});
  }

  ModelWeights load(bool amx) const {
    const auto product = [](std::string_view name) { return name == "w"; };
    return ModelWeights::load(ByteSource::memory(bytes), placements, cpu_device(), "test weights",
                              amx ? std::function<bool(std::string_view)>(product) : nullptr);
  }
};

// w x for activations of shape `shape` ([k, ...]; transposed: built as [shape[1],
// k, ...] and transposed to a strided view), with the product written by `product`;
// the activations are `given_input` when given, else normal values from `seed`.
std::vector<float> product(const ModelWeights& weights, std::array<int64_t, 3> shape, bool transposed, uint32_t seed,
                           int threads, const std::vector<float>* given_input = nullptr) {
  ggml_tensor* w = weights.find("w");
  const ggml_init_params params{64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  const ggml_context_ptr ctx(ggml_init(params));
  ggml_tensor* x = transposed ? ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, shape[1], shape[0], shape[2])
                              : ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, shape[0], shape[1], shape[2]);
  ggml_set_input(x);
  ggml_tensor* operand = transposed ? ggml_transpose(ctx.get(), x) : x;
  ggml_tensor* y = mul_mat(ctx.get(), w, operand);
  ggml_set_output(y);
  ggml_cgraph* graph = ggml_new_graph(ctx.get());
  ggml_build_forward_expand(graph, y);
  const ggml_gallocr_ptr alloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
  EXPECT_TRUE(ggml_gallocr_alloc_graph(alloc.get(), graph));
  std::vector<float> input(static_cast<size_t>(ggml_nelements(x)));
  if (given_input != nullptr) {
    EXPECT_EQ(given_input->size(), input.size());
    std::copy_n(given_input->begin(), std::min(input.size(), given_input->size()), input.begin());
  } else {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : input) v = normal(rng);
  }
  ggml_backend_tensor_set(x, input.data(), 0, input.size() * sizeof(float));
  const ggml_backend_ptr backend = create_backend(cpu_device(), threads);
  EXPECT_EQ(ggml_backend_graph_compute(backend.get(), graph), GGML_STATUS_SUCCESS);
  EXPECT_EQ(y->ne[0], w->ne[1]);
  EXPECT_EQ(y->ne[1], shape[1]);
  EXPECT_EQ(y->ne[2], shape[2]);
  std::vector<float> out(static_cast<size_t>(ggml_nelements(y)));
  ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
  return out;
}

struct Case {
  ggml_type type;
  int64_t k, n;
  std::array<int64_t, 3> shape;  // activations [k, rows, batch]
  bool transposed;
};

class AmxProduct : public ::testing::TestWithParam<Case> {};

TEST_P(AmxProduct, EqualsGgmlsKernelsOnTheSameQuantisedWeight) {
  const Case c = GetParam();
  const QuantisedWeight weight(c.k, c.n, c.type, 7);
  const ModelWeights plain = weight.load(false);
  const ModelWeights amx = weight.load(true);
  ASSERT_EQ(plain.n_amx(), 0u);
  if (amx_buffer_type() == nullptr) {
    // Nothing can go to AMX here, and auto says so.
    EXPECT_EQ(amx.n_amx(), 0u) << amx_status();
    EXPECT_FALSE(amx_wanted(CpuKernels::kAuto, nullptr));
    EXPECT_NE(amx_status().find("no AMX"), std::string::npos) << amx_status();
  } else {
    EXPECT_EQ(amx.n_amx(), 1u) << "w fits the AMX kernels";
    EXPECT_TRUE(in_amx_buffer(amx.find("w")));
    EXPECT_FALSE(in_amx_buffer(amx.find("b"))) << "only the named product weights go";
    EXPECT_TRUE(amx_wanted(CpuKernels::kAuto, nullptr));
    EXPECT_FALSE(amx_wanted(CpuKernels::kGgml, nullptr));
  }
  for (int threads : {1, 2, 3}) {
    const std::vector<float> want = product(plain, c.shape, c.transposed, 11, threads);
    const std::vector<float> got = product(amx, c.shape, c.transposed, 11, threads);
    ASSERT_EQ(want.size(), got.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, double(std::fabs(want[i] - got[i])));
      scale = std::max(scale, double(std::fabs(want[i])));
    }
    // Block sums of exact integer products in another order: f32 rounding only.
    EXPECT_LE(worst, 1e-5 * scale) << "threads " << threads << ", largest value " << scale;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AmxProduct,
    ::testing::Values(Case{GGML_TYPE_Q8_0, 256, 96, {256, 56, 1}, false},  // a batched step's rows
                      Case{GGML_TYPE_Q8_0, 256, 64, {256, 1, 1}, false},   // one row (the vector kernel)
                      Case{GGML_TYPE_Q8_0, 128, 64, {128, 7, 3}, false},   // 3-D activations: flattened
                      Case{GGML_TYPE_Q8_0, 128, 32, {128, 40, 1}, false},
                      Case{GGML_TYPE_Q4_0, 256, 64, {256, 33, 1}, false},
                      Case{GGML_TYPE_Q4_0, 256, 160, {256, 3, 1}, false},  // few rows: the vector kernel per row
                      Case{GGML_TYPE_Q8_0, 256, 96, {256, 4, 1}, false},
                      Case{GGML_TYPE_Q4_K, 512, 64, {512, 20, 2}, false}));

// Each row of a product of a few rows is its one-row product bit for bit,
// whatever the other rows and the threads: with the one-row kernel run row by
// row (up to 4 rows: cmake/ggml/patches/amx-few-rows.patch) as with ggml's
// tiles (from 5 rows, or every row count with GGML_AMX_VNNI_MAX_ROWS=1). It is
// what makes a session's greedy steps batched with others equal its lone ones.
TEST(AmxFewRows, EachRowIsItsOneRowProductBitForBit) {
  for (const ggml_type type : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
    const QuantisedWeight weight(512, 160, type, 5);
    const ModelWeights amx = weight.load(true);
    if (amx_buffer_type() == nullptr) {
      EXPECT_EQ(amx.n_amx(), 0u) << amx_status();
      continue;
    }
    ASSERT_EQ(amx.n_amx(), 1u);
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t rows = 2; rows <= 8; ++rows) {
      std::vector<float> input(static_cast<size_t>(512 * rows));
      for (float& v : input) v = normal(rng);
      for (int threads : {1, 2, 3}) {
        const std::vector<float> all = product(amx, {512, rows, 1}, false, 0, threads, &input);
        ASSERT_EQ(all.size(), static_cast<size_t>(160 * rows));
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> row(input.begin() + r * 512, input.begin() + (r + 1) * 512);
          const std::vector<float> one = product(amx, {512, 1, 1}, false, 0, threads, &row);
          for (size_t i = 0; i < one.size(); ++i)
            ASSERT_EQ(all[static_cast<size_t>(r) * 160 + i], one[i])
                << ggml_type_name(type) << ", " << rows << " rows, row " << r << ", " << threads << " threads, feature "
                << i;
        }
      }
    }
  }
}

TEST(AmxPlacement, WeightsItsKernelsCannotTakeStayInTheOrdinaryBuffer) {
  EXPECT_FALSE(amx_can_hold(GGML_TYPE_F16, 2, {256, 64, 1, 1})) << "no AMX kernel for f16 weights";
  EXPECT_FALSE(amx_can_hold(GGML_TYPE_Q5_0, 2, {256, 64, 1, 1})) << "nor for Q5_0";
  EXPECT_FALSE(amx_can_hold(GGML_TYPE_Q8_0, 2, {256, 48, 1, 1})) << "output features not a multiple of 32";
  EXPECT_FALSE(amx_can_hold(GGML_TYPE_Q4_K, 2, {288, 64, 1, 1})) << "rows not a multiple of 256";
  EXPECT_FALSE(amx_can_hold(GGML_TYPE_Q8_0, 3, {256, 64, 2, 1})) << "not a matrix";
  EXPECT_TRUE(amx_can_hold(GGML_TYPE_Q8_0, 2, {256, 64, 1, 1}));
  const QuantisedWeight odd(256, 48, GGML_TYPE_Q8_0, 3);
  EXPECT_EQ(odd.load(true).n_amx(), 0u);
}

TEST(AmxPlacement, NothingButTheProductReadsAnAmxWeight) {
  const QuantisedWeight weight(256, 64, GGML_TYPE_Q8_0, 5);
  const ModelWeights amx = weight.load(true);
  if (amx_buffer_type() == nullptr) {  // no AMX here: no weight is ever placed there
    EXPECT_EQ(amx.n_amx(), 0u) << amx_status();
    return;
  }
  ASSERT_EQ(amx.n_amx(), 1u);
  const ggml_init_params params{16 * ggml_tensor_overhead(), nullptr, true};
  const ggml_context_ptr ctx(ggml_init(params));
  try {
    to_f32(ctx.get(), amx.find("w"));
    ADD_FAILURE() << "to_f32 read a weight in the AMX kernels' layout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("AMX"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace earshot::runtime

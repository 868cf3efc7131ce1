// The FastConformer's relative-position attention on OpenBLAS
// (runtime::blas_relpos_attention) against the ggml graph the family builds
// otherwise (attention_heads), on the same random inputs: one query block
// and several, with and without a mask.
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/fastconformer/conformer_blocks.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::fastconformer {
namespace {

void fill(ggml_tensor* t, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  auto* data = static_cast<float*>(t->data);
  for (int64_t i = 0; i < ggml_nelements(t); ++i) data[i] = d(rng);
}

struct Case {
  int n_head, head_dim, frames;
  bool mask;
};

class RelposAttention : public ::testing::TestWithParam<Case> {};

TEST_P(RelposAttention, OpenBlasEqualsTheGgmlGraph) {
  ASSERT_TRUE(runtime::openblas_available()) << runtime::openblas_status();
  const Case c = GetParam();
  const int D = c.n_head * c.head_dim, T = c.frames;
  const ggml_init_params params{size_t{64} << 20, nullptr, false};
  const ggml_context_ptr guard(ggml_init(params));
  ggml_context* ctx = guard.get();
  ggml_tensor* q = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, T);
  ggml_tensor* k = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, T);
  ggml_tensor* v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, T);
  ggml_tensor* p = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, D, 2 * T - 1);
  Layer l{};
  l.pos_bias_u = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.head_dim, c.n_head);
  l.pos_bias_v = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.head_dim, c.n_head);
  fill(q, 1, 1.0f), fill(k, 2, 1.0f), fill(v, 3, 1.0f), fill(p, 4, 1.0f);
  fill(l.pos_bias_u, 5, 0.5f), fill(l.pos_bias_v, 6, 0.5f);
  ggml_tensor* mask = nullptr;
  if (c.mask) {  // chunks of 4 frames seeing themselves and two chunks back
    mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, T, T);
    auto* m = static_cast<float*>(mask->data);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) m[i * T + j] = (i / 4 - j / 4 >= 0 && i / 4 - j / 4 <= 2) ? 0.0f : -INFINITY;
  }
  Hparams hp;
  hp.n_state = D;
  hp.n_head = c.n_head;
  ggml_tensor* want = attention_heads(
      ctx, hp, l, ggml_reshape_3d(ctx, q, c.head_dim, c.n_head, T), ggml_reshape_3d(ctx, k, c.head_dim, c.n_head, T),
      ggml_reshape_3d(ctx, v, c.head_dim, c.n_head, T), ggml_reshape_3d(ctx, p, c.head_dim, c.n_head, 2 * T - 1), mask);
  ggml_tensor* got = runtime::blas_relpos_attention(ctx, q, k, v, p, l.pos_bias_u, l.pos_bias_v, mask, c.n_head);
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, want);
  ggml_build_forward_expand(graph, got);
  ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, graph, 2), GGML_STATUS_SUCCESS);
  ASSERT_EQ(ggml_nelements(want), ggml_nelements(got));
  const auto* a = static_cast<const float*>(want->data);
  const auto* b = static_cast<const float*>(got->data);
  double worst = 0;
  for (int64_t i = 0; i < ggml_nelements(want); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  EXPECT_LT(worst, 2e-5) << "frames " << T << (c.mask ? " masked" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RelposAttention,
                         ::testing::Values(Case{4, 16, 37, false},   // one query block
                                           Case{4, 16, 300, false},  // two blocks, the last partial
                                           Case{2, 32, 300, true},   // chunked mask: masked scores weigh 0
                                           Case{3, 8, 5, true}));

}  // namespace
}  // namespace earshot::fastconformer

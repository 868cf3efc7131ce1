// runtime::GraphAllocator: a graph never runs on a plan made for another make-up.
#include "model/runtime/graph_allocator.h"

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace earshot::runtime {
namespace {

// x -> y = x^2 -> z = sqrt(y) -> w = z^2, four elements; `keep_y` marks y as an
// output (read back after the graph ran), as a decoder step marks the attention it
// returns. Both make-ups have the same nodes, leafs and sizes.
struct Chain {
  ggml_context_ptr ctx;
  ggml_cgraph* graph = nullptr;
  ggml_tensor *x = nullptr, *y = nullptr, *w = nullptr;

  explicit Chain(bool keep_y) {
    const ggml_init_params params{ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
    ctx.reset(ggml_init(params));
    x = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1024);
    ggml_set_input(x);
    y = ggml_sqr(ctx.get(), x);
    if (keep_y) ggml_set_output(y);
    ggml_tensor* z = ggml_sqrt(ctx.get(), y);
    w = ggml_sqr(ctx.get(), ggml_scale(ctx.get(), z, 3.0f));
    ggml_set_output(w);
    graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, w);
  }
};

bool overlap(const ggml_tensor* a, const ggml_tensor* b) {
  const auto* a0 = static_cast<const char*>(a->data);
  const auto* b0 = static_cast<const char*>(b->data);
  return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

// The cause, in ggml itself: ggml_gallocr_alloc_graph keeps a plan made for a graph
// whose y was free to reuse, and the next graph's output y shares memory with a
// later node. If ggml ever re-plans on its own, this test says so.
TEST(GraphAllocator, GgmlAloneReusesAPlanMadeForAnotherMakeUp) {
  ggml_gallocr_t plain = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
  Chain without(false), with(true);
  ASSERT_TRUE(ggml_gallocr_alloc_graph(plain, without.graph));
  ASSERT_TRUE(ggml_gallocr_alloc_graph(plain, with.graph));
  bool shared = false;
  for (int i = 0; i < ggml_graph_n_nodes(with.graph); ++i) {
    const ggml_tensor* node = ggml_graph_node(with.graph, i);
    if (node != with.y && node->view_src == nullptr) shared = shared || overlap(node, with.y);
  }
  EXPECT_TRUE(shared);
  // A plan made for this make-up keeps the output apart (a fresh graph: tensors
  // that already have memory are taken as placed).
  Chain again(true);
  ASSERT_TRUE(ggml_gallocr_reserve(plain, again.graph));
  ASSERT_TRUE(ggml_gallocr_alloc_graph(plain, again.graph));
  for (int i = 0; i < ggml_graph_n_nodes(again.graph); ++i) {
    const ggml_tensor* node = ggml_graph_node(again.graph, i);
    if (node != again.y && node->view_src == nullptr) {
      EXPECT_FALSE(overlap(node, again.y)) << i;
    }
  }
  ggml_gallocr_free(plain);
}

TEST(GraphAllocator, AnOutputSurvivesAfterAGraphOfAnotherMakeUp) {
  const ggml_backend_ptr backend(ggml_backend_cpu_init());
  GraphAllocator alloc(ggml_backend_get_default_buffer_type(backend.get()));
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i) - 3.0f;
  Chain without(false), with(true);
  EXPECT_NE(GraphAllocator::signature(without.graph), GraphAllocator::signature(with.graph));
  ASSERT_TRUE(alloc.alloc(without.graph));
  ggml_backend_tensor_set(without.x, x.data(), 0, x.size() * sizeof(float));
  ASSERT_EQ(ggml_backend_graph_compute(backend.get(), without.graph), GGML_STATUS_SUCCESS);
  ASSERT_TRUE(alloc.alloc(with.graph));
  EXPECT_EQ(alloc.plans(), 2);
  ggml_backend_tensor_set(with.x, x.data(), 0, x.size() * sizeof(float));
  ASSERT_EQ(ggml_backend_graph_compute(backend.get(), with.graph), GGML_STATUS_SUCCESS);
  std::vector<float> y(x.size()), w(x.size());
  ggml_backend_tensor_get(with.y, y.data(), 0, y.size() * sizeof(float));
  ggml_backend_tensor_get(with.w, w.data(), 0, w.size() * sizeof(float));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FLOAT_EQ(y[i], x[i] * x[i]) << i;
    ASSERT_NEAR(w[i], 9.0f * x[i] * x[i], 1e-3f * (1.0f + w[i])) << i;
  }
}

TEST(GraphAllocator, ARepeatedMakeUpReusesItsPlan) {
  const ggml_backend_ptr backend(ggml_backend_cpu_init());
  GraphAllocator alloc(ggml_backend_get_default_buffer_type(backend.get()));
  Chain a(true), b(true), c(false);
  EXPECT_EQ(GraphAllocator::signature(a.graph), GraphAllocator::signature(b.graph));
  ASSERT_TRUE(alloc.alloc(a.graph));
  ASSERT_TRUE(alloc.alloc(b.graph));
  EXPECT_EQ(alloc.plans(), 1);
  ASSERT_TRUE(alloc.alloc(c.graph));
  EXPECT_EQ(alloc.plans(), 2);
  // A worst-case reservation sizes the buffer but is no plan for the next graph.
  ASSERT_TRUE(alloc.reserve(a.graph));
  ASSERT_TRUE(alloc.alloc(c.graph));
  EXPECT_EQ(alloc.plans(), 3);
  EXPECT_GT(alloc.buffer_size(), 0u);
}

}  // namespace
}  // namespace earshot::runtime

// runtime::GraphRunner: the graph cycle every family runs (begin, build, allocate,
// inputs, compute, read back), one plan per family of graphs, checked inputs and
// read-backs, errors that name the graph.
#include "model/runtime/graph_runner.h"

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/pass_stop.h"

namespace earshot::runtime {
namespace {

ggml_backend_ptr cpu() { return ggml_backend_ptr(ggml_backend_cpu_init()); }

// y = a * x + b over n values, built on the runner's graph.
struct Affine {
  ggml_tensor *x = nullptr, *y = nullptr;
  Affine(const GraphRunner::Graph& g, int n, float a, float b) {
    x = ggml_new_tensor_1d(g.ctx(), GGML_TYPE_F32, n);
    ggml_set_input(x);
    y = ggml_scale_bias(g.ctx(), x, a, b);
    ggml_set_output(y);
    ggml_build_forward_expand(g.graph(), y);
  }
};

TEST(GraphRunner, ComputesAGraphAndReadsItBack) {
  const ggml_backend_ptr backend = cpu();
  GraphRunner runner(backend.get(), "test");
  for (int round = 0; round < 3; ++round) {
    const GraphRunner::Graph g = runner.begin(16);
    const Affine f(g, 5, 2.0f, static_cast<float>(round));
    runner.allocate(g);
    set_input(f.x, std::vector<float>{1, 2, 3, 4, 5});
    runner.compute(g);
    const std::vector<float> y = read_output(f.y);
    ASSERT_EQ(y.size(), 5u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], 2.0f * (i + 1) + round);
  }
  // The same make-up three times: one plan.
  EXPECT_EQ(runner.allocator().plans(), 1);
}

// A chain of `n` scalings of x by 1 (n nodes).
ggml_tensor* chain(const GraphRunner::Graph& g, int n, ggml_tensor*& x) {
  x = ggml_new_tensor_1d(g.ctx(), GGML_TYPE_F32, 4);
  ggml_set_input(x);
  ggml_tensor* y = x;
  for (int i = 0; i < n; ++i) y = ggml_scale(g.ctx(), y, 1.0f);
  ggml_set_output(y);
  ggml_build_forward_expand(g.graph(), y);
  return y;
}

// A stoppable pass (common/pass_stop.h): the listener is asked between nodes,
// on the computing thread, and a `true` stops the graph with PassStopped. Graphs
// outside a StoppablePass, or without a listener, are never asked or stopped, and
// a graph the listener computes itself (the VAD's) is not stoppable.
TEST(GraphRunner, AStoppablePassAsksItsListenerBetweenNodesAndStopsWhenItSays) {
  const ggml_backend_ptr backend = cpu(), other = cpu();
  GraphRunner runner(backend.get(), "test"), inner(other.get(), "inner");
  auto compute = [&](int nodes) {
    const GraphRunner::Graph g = runner.begin(nodes + 8);
    ggml_tensor* x = nullptr;
    chain(g, nodes, x);
    runner.allocate(g);
    set_input(x, std::vector<float>{1, 2, 3, 4});
    runner.compute(g);
  };
  {
    StoppablePass stoppable;  // no listener: nothing to ask
    compute(20);
  }
  int asked = 0, inner_asked = 0;
  PassListener listen([&] {
    ++asked;
    const GraphRunner::Graph g = inner.begin(16);  // the listener's own graph
    ggml_tensor* x = nullptr;
    chain(g, 4, x);
    inner.allocate(g);
    set_input(x, std::vector<float>{1, 2, 3, 4});
    inner.compute(g);
    inner_asked += pass_stop_listener() != nullptr;
    return asked == 5;
  });
  compute(20);  // not in a stoppable pass
  EXPECT_EQ(asked, 0);
  {
    StoppablePass stoppable;
    EXPECT_THROW(compute(20), PassStopped);
    EXPECT_EQ(asked, 5);  // after the fifth node
    EXPECT_EQ(inner_asked, 0);
    asked = 10;  // says no from here on
    compute(20);
    EXPECT_EQ(asked, 30);
  }
  {
    // A nested listener is asked first; either one stops the pass.
    int inner = 0;
    PassListener nested([&] { return ++inner == 3; });
    StoppablePass stoppable;
    EXPECT_THROW(compute(20), PassStopped);
    EXPECT_EQ(inner, 3);
    EXPECT_EQ(asked, 32);  // the outer one, after each inner no
    asked = 4;             // the outer one says stop at its fifth question
    inner = 100;
    EXPECT_THROW(compute(20), PassStopped);
    EXPECT_EQ(asked, 5);
  }
}

TEST(GraphRunner, EachFamilyOfGraphsKeepsItsOwnPlan) {
  const ggml_backend_ptr backend = cpu();
  GraphRunner runner(backend.get(), std::vector<std::string>{"encoder", "decoder"});
  for (int round = 0; round < 4; ++round) {
    for (int plan : {0, 1}) {
      const GraphRunner::Graph g = runner.begin(16, plan);
      const Affine f(g, plan == 0 ? 64 : 8, 1.0f, 1.0f);
      runner.allocate(g);
      set_input(f.x, std::vector<float>(plan == 0 ? 64 : 8, 1.0f));
      runner.compute(g);
      EXPECT_EQ(read_output(f.y).front(), 2.0f);
    }
  }
  // Alternating shapes on one plan would re-plan every time; on two, once each.
  EXPECT_EQ(runner.allocator(0).plans(), 1);
  EXPECT_EQ(runner.allocator(1).plans(), 1);
  EXPECT_THROW(runner.begin(16, 2), Error);
}

TEST(GraphRunner, ABiggerGraphGrowsTheMetadataRoom) {
  const ggml_backend_ptr backend = cpu();
  GraphRunner runner(backend.get(), "test");
  for (int nodes : {4, 4096}) {
    const GraphRunner::Graph g = runner.begin(nodes);
    ggml_tensor* x = ggml_new_tensor_1d(g.ctx(), GGML_TYPE_F32, 4);
    ggml_set_input(x);
    ggml_tensor* y = x;
    for (int i = 0; i < nodes - 1; ++i) y = ggml_scale(g.ctx(), y, 1.0f);
    ggml_set_output(y);
    ggml_build_forward_expand(g.graph(), y);
    EXPECT_EQ(ggml_graph_n_nodes(g.graph()), nodes - 1);
    runner.allocate(g);
    set_input(x, std::vector<float>{1, 2, 3, 4});
    runner.compute(g);
    EXPECT_EQ(read_output(y), (std::vector<float>{1, 2, 3, 4}));
  }
}

TEST(GraphRunner, InputsAndReadBacksAreChecked) {
  const ggml_backend_ptr backend = cpu();
  GraphRunner runner(backend.get(), "test");
  const GraphRunner::Graph g = runner.begin(16);
  const Affine f(g, 4, 1.0f, 0.0f);
  ggml_tensor* transposed = ggml_transpose(g.ctx(), ggml_reshape_2d(g.ctx(), f.y, 2, 2));  // a non-contiguous view
  runner.allocate(g);
  try {
    set_input(f.x, std::vector<float>(5, 0.0f));
    FAIL() << "an input larger than its tensor was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  EXPECT_THROW(set_input(f.x, std::vector<float>(2, 0.0f), 3 * sizeof(float)), Error);
  set_input(f.x, std::vector<float>{5, 6}, 2 * sizeof(float));  // the last two values
  set_input(f.x, std::vector<float>{3, 4});
  runner.compute(g);
  EXPECT_EQ(read_output(f.y), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_THROW(read_output(transposed), Error);
}

TEST(GraphRunner, ErrorsNameTheGraph) {
  EXPECT_THROW(GraphRunner(nullptr, "encoder"), Error);
  try {
    GraphRunner runner(nullptr, "encoder");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace earshot::runtime

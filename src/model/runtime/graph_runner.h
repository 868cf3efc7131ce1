// The one graph cycle every model family's compute goes through: a context for a
// graph's tensor metadata, the graph, its allocation with a plan per graph make-up
// (GraphAllocator), the inputs, the computation and the read-back, with errors that
// name the graph.
//
//   runtime::GraphRunner runner(backend, "encoder");
//   runtime::GraphRunner::Graph g = runner.begin(kMaxNodes);
//   ggml_tensor* x = ... build on g.ctx(), ggml_build_forward_expand(g.graph(), out) ...
//   runner.allocate(g);            // a plan of its own unless the last graph had this make-up
//   runtime::set_input(x, values);
//   runner.compute(g);
//   std::vector<float> y = runtime::read_output(out);
//
// The runner borrows its backend (which outlives it). A graph's tensors live until
// the next begin() on the same runner: one graph at a time.
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/runtime/graph_allocator.h"

namespace earshot::runtime {

class GraphRunner {
 public:
  // `what` names the graphs in errors ("encoder" -> "the encoder graph failed to
  // compute"). With several names, each is a family of graphs that keeps its own
  // plan side by side (a session alternating encoder and decoder graphs keeps one
  // for each), chosen by its index in begin().
  GraphRunner(ggml_backend_t backend, std::string what);
  GraphRunner(ggml_backend_t backend, std::vector<std::string> plans);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // One graph under construction or computed: its context (tensor metadata only,
  // in the runner's reused buffer) and its graph.
  class Graph {
   public:
    Graph() = default;
    Graph(Graph&&) noexcept = default;
    Graph& operator=(Graph&&) noexcept = default;
    ggml_context* ctx() const { return ctx_.get(); }
    ggml_cgraph* graph() const { return graph_; }
    int plan() const { return plan_; }

   private:
    friend class GraphRunner;
    ggml_context_ptr ctx_;
    ggml_cgraph* graph_ = nullptr;
    int plan_ = 0;
  };

  // A new graph of at most max_nodes nodes, allocated with plan `plan` (the index of
  // its name in the constructor).
  // The previous graph's metadata is overwritten: it must not be used after this.
  Graph begin(int max_nodes, int plan = 0);

  // Places every tensor of the graph in the compute buffer, reusing the plan's last
  // allocation when the graph has exactly its make-up. Throws kInternal naming the
  // graph (and `detail`, e.g. its size) when the buffer cannot grow to it.
  void allocate(const Graph& graph, const std::string& detail = {});
  // Sizes the plan's compute buffer for a worst-case graph ahead of time.
  void reserve(const Graph& graph, const std::string& detail = {});
  // Throws kUnsupported naming the first op the backend cannot run (a clear error
  // before a stream starts, not a failure in the middle of one).
  void check_supported(const Graph& graph) const;
  // Runs the allocated graph; throws kInternal naming the graph on failure. On a
  // CPU backend, with pass_threads() set (common/pass_threads.h: the scheduler
  // lends a lone pass the idle workers' cores), it runs on that many threads.
  void compute(const Graph& graph);
  // Keeps the backend's own thread count whatever pass_threads() says: graphs so
  // small (a VAD window) that more threads only add their wake-ups.
  void ignore_pass_threads() { follow_pass_threads_ = false; }

  ggml_backend_t backend() const { return backend_; }
  const GraphAllocator& allocator(int plan = 0) const { return *plans_.at(plan).alloc; }

 private:
  struct Plan {
    std::string what;
    std::unique_ptr<GraphAllocator> alloc;
  };
  ggml_backend_t backend_;
  std::vector<Plan> plans_;
  bool follow_pass_threads_ = true;
  // Room for a graph's tensor and node metadata, grown on demand and left
  // uninitialised: ggml writes each object it places, and a zeroed buffer would make
  // every idle session resident by that much before its first pass.
  std::unique_ptr<uint8_t[]> meta_;
  size_t meta_size_ = 0;
};

// Copies values into an input tensor (at a byte offset), or reads a computed tensor
// back whole. Sizes are checked: a mismatch is an internal error, not a silent overrun.
template <typename T>
void set_input(ggml_tensor* tensor, std::span<const T> values, size_t byte_offset = 0);
template <typename T>
void set_input(ggml_tensor* tensor, const std::vector<T>& values, size_t byte_offset = 0) {
  set_input(tensor, std::span<const T>(values), byte_offset);
}
std::vector<float> read_output(const ggml_tensor* tensor);

}  // namespace earshot::runtime

// A compute graph's tensors allocated with a plan made for that graph's make-up.
//
// ggml_gallocr_alloc_graph keeps its previous plan whenever the new graph has as many
// nodes and leafs as the planned one and every tensor fits in its planned slot, even
// when the graph differs in what the plan depends on: another tensor marked as an
// output, other ops or another wiring at the same counts. Nodes computed after a
// tensor's last use in the old graph may then share its memory, and a tensor this
// graph reads back is overwritten before it is read. (Seen as alignment-head
// attention values of 5.69 after a rollback: the plan came from a step that asked
// for no attention.) GraphAllocator re-plans unless the graph has exactly the
// signature of the last planned one (every leaf's and node's op, type, shape,
// strides, flags, view offset and sources, in order), so a repeated graph reuses
// its plan and any other graph gets its own. The compute buffer only grows.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <cstdint>

namespace earshot::runtime {

class GraphAllocator {
 public:
  explicit GraphAllocator(ggml_backend_buffer_type_t buffer_type);
  ~GraphAllocator();
  GraphAllocator(const GraphAllocator&) = delete;
  GraphAllocator& operator=(const GraphAllocator&) = delete;

  // Sizes the buffer for a worst-case graph ahead of time (the plan is not kept for
  // allocation: the next alloc() plans its own graph). False if it cannot be allocated.
  bool reserve(ggml_cgraph* graph);
  // Allocates every tensor of the graph; false if the buffer cannot grow to it.
  bool alloc(ggml_cgraph* graph);

  // Plans made so far (a graph equal to the last planned one reuses it).
  int64_t plans() const { return plans_; }
  size_t buffer_size() const;

  // The signature alloc() compares: equal for graphs whose allocation plans are equal.
  static uint64_t signature(const ggml_cgraph* graph);

 private:
  ggml_gallocr_t alloc_ = nullptr;
  uint64_t planned_ = 0;  // signature of the graph the current plan was made for; 0: none
  int64_t plans_ = 0;
};

}  // namespace earshot::runtime

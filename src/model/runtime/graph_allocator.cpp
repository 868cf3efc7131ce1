#include "model/runtime/graph_allocator.h"

#include <ggml.h>

#include <unordered_map>

#include "common/error.h"

namespace earshot::runtime {
namespace {

// FNV-1a over 64-bit words.
struct Hasher {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
};

}  // namespace

GraphAllocator::GraphAllocator(ggml_backend_buffer_type_t buffer_type) : alloc_(ggml_gallocr_new(buffer_type)) {
  if (alloc_ == nullptr) throw Error(ErrorCode::kInternal, "cannot create a graph allocator");
}

GraphAllocator::~GraphAllocator() { ggml_gallocr_free(alloc_); }

uint64_t GraphAllocator::signature(const ggml_cgraph* graph) {
  ggml_cgraph* g = const_cast<ggml_cgraph*>(graph);  // ggml's accessors take a non-const graph
  const int n_nodes = ggml_graph_n_nodes(g);
  std::unordered_map<const ggml_tensor*, uint64_t> index;
  index.reserve(static_cast<size_t>(n_nodes) * 2 + 16);
  Hasher hash;
  hash.add(static_cast<uint64_t>(n_nodes));
  auto add_tensor = [&](const ggml_tensor* t) {
    hash.add(static_cast<uint64_t>(t->op));
    hash.add(static_cast<uint64_t>(t->type));
    hash.add(static_cast<uint64_t>(t->flags));
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
      hash.add(static_cast<uint64_t>(t->ne[d]));
      hash.add(static_cast<uint64_t>(t->nb[d]));
    }
    hash.add(t->view_offs);
    // Tensors outside the graph (weights, caches) count by identity: they are not
    // allocated here, but a view of another one is another graph.
    auto source_id = [&](const ggml_tensor* s) -> uint64_t {
      if (s == nullptr) return 0;
      auto it = index.find(s);
      return it != index.end() ? it->second : reinterpret_cast<uintptr_t>(s) ^ 0x8000000000000000ull;
    };
    hash.add(source_id(t->view_src));
    for (int s = 0; s < GGML_MAX_SRC; ++s) hash.add(source_id(t->src[s]));
    // Sources first seen here are leafs of the graph: give them an index too.
    index.emplace(t, index.size() + 1);
  };
  for (int i = 0; i < n_nodes; ++i) {
    const ggml_tensor* node = ggml_graph_node(g, i);
    for (int s = 0; s < GGML_MAX_SRC; ++s) {
      const ggml_tensor* src = node->src[s];
      if (src != nullptr && src->data == nullptr && index.find(src) == index.end()) add_tensor(src);
    }
    add_tensor(node);
  }
  const uint64_t h = hash.h;
  return h == 0 ? 1 : h;
}

bool GraphAllocator::reserve(ggml_cgraph* graph) {
  planned_ = 0;  // the worst case's plan is not a plan for the graphs to come
  return ggml_gallocr_reserve(alloc_, graph);
}

bool GraphAllocator::alloc(ggml_cgraph* graph) {
  const uint64_t sig = signature(graph);
  if (sig != planned_) {
    planned_ = 0;
    if (!ggml_gallocr_reserve(alloc_, graph)) return false;
    planned_ = sig;
    ++plans_;
  }
  return ggml_gallocr_alloc_graph(alloc_, graph);
}

size_t GraphAllocator::buffer_size() const { return ggml_gallocr_get_buffer_size(alloc_, 0); }

}  // namespace earshot::runtime

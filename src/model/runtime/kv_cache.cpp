#include "model/runtime/kv_cache.h"

#include <ggml-cpp.h>

#include <algorithm>
#include <string>

#include "common/error.h"

namespace earshot::runtime {
namespace {

// Graph nodes (and tensors) per moved sequence: K and V, each a view, a copy and
// possibly a temporary with its own view and copy.
constexpr int kNodesPerMove = 12;

}  // namespace

KvCache::KvCache(ggml_backend_t backend, const KvCacheShape& shape, int n_sequences)
    : backend_(backend), shape_(shape) {
  if (!backend_) throw Error(ErrorCode::kInternal, "KvCache needs a ggml backend, got null");
  if (shape_.n_layer < 1 || shape_.n_embd < 1 || shape_.n_ctx < 1 || shape_.n_scratch < 1 ||
      shape_.n_scratch > shape_.n_ctx) {
    throw Error(ErrorCode::kInvalidArgument,
                "KV cache shape needs >= 1 layer, width and position and 1..n_ctx scratch positions, got " +
                    std::to_string(shape_.n_layer) + " layers x " + std::to_string(shape_.n_embd) + " x " +
                    std::to_string(shape_.n_ctx) + " positions, " + std::to_string(shape_.n_scratch) + " scratch");
  }
  if (ggml_is_quantized(shape_.type)) {
    throw Error(ErrorCode::kUnsupported, std::string("KV cache type ") + ggml_type_name(shape_.type) +
                                             " is quantised; the cache takes f16 or f32");
  }
  runner_ = std::make_unique<GraphRunner>(backend_, "KV-cache copy");
  reserve(n_sequences);
}

KvCache::~KvCache() {
  runner_.reset();
  if (buffer_) ggml_backend_buffer_free(buffer_);
  if (ctx_) ggml_free(ctx_);
}

int KvCache::max_graph_nodes() const { return kNodesPerMove * capacity_ + 16; }

size_t KvCache::element_size() const { return ggml_type_size(shape_.type); }
size_t KvCache::sequence_bytes() const { return static_cast<size_t>(shape_.n_ctx) * shape_.n_embd * element_size(); }
size_t KvCache::layer_bytes() const { return capacity_ * sequence_bytes(); }

void KvCache::allocate(int n_sequences) {
  if (buffer_) ggml_backend_buffer_free(buffer_);
  if (ctx_) ggml_free(ctx_);
  buffer_ = nullptr;
  ggml_init_params params{4 * ggml_tensor_overhead(), nullptr, true};
  ctx_ = ggml_init(params);
  if (!ctx_) throw Error(ErrorCode::kInternal, "ggml_init failed for the KV cache");
  const int64_t n = static_cast<int64_t>(shape_.n_layer) * n_sequences * shape_.n_ctx * shape_.n_embd;
  k_ = ggml_new_tensor_1d(ctx_, shape_.type, n);
  v_ = ggml_new_tensor_1d(ctx_, shape_.type, n);
  k_scratch_ = ggml_new_tensor_3d(ctx_, shape_.type, shape_.n_embd, shape_.n_scratch, shape_.n_layer);
  v_scratch_ = ggml_new_tensor_3d(ctx_, shape_.type, shape_.n_scratch, shape_.n_embd, shape_.n_layer);
  buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend_);
  if (!buffer_) {
    capacity_ = 0;
    lengths_.clear();
    throw Error(ErrorCode::kInternal, "cannot allocate a KV cache of " + std::to_string(n_sequences) + " sequences x " +
                                          std::to_string(shape_.n_ctx) + " positions on " +
                                          ggml_backend_name(backend_));
  }
  ggml_backend_buffer_clear(buffer_, 0);
  capacity_ = n_sequences;
  lengths_.assign(n_sequences, 0);
}

void KvCache::reserve(int n_sequences) {
  if (n_sequences < 1) {
    throw Error(ErrorCode::kInvalidArgument, "a KV cache needs >= 1 sequence, got " + std::to_string(n_sequences));
  }
  if (n_sequences <= capacity_) return;
  allocate(n_sequences);
  if (capacity_ == 1) return;  // nothing to reorder: no temporaries to reserve
  // The largest reorder (every sequence moved, full length), checked against the
  // device and reserved once: no allocation in the middle of a stream.
  std::vector<Move> rotate;
  for (int s = 0; s < capacity_; ++s) rotate.push_back({(s + 1) % capacity_, s, shape_.n_ctx});
  const GraphRunner::Graph g = runner_->begin(max_graph_nodes());
  build_moves(g.ctx(), g.graph(), rotate);
  runner_->check_supported(g);
  runner_->reserve(g);
}

void KvCache::check_sequence(int seq, const char* what) const {
  if (seq < 0 || seq >= capacity_) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": sequence " + std::to_string(seq) +
                                                 " is not in the cache (0.." + std::to_string(capacity_ - 1) + ")");
  }
}

int KvCache::length(int seq) const {
  check_sequence(seq, "KV cache length");
  return lengths_[seq];
}

void KvCache::set_length(int seq, int n) {
  check_sequence(seq, "KV cache set_length");
  if (n < 0 || n > shape_.n_ctx) {
    throw Error(ErrorCode::kInvalidArgument,
                "KV cache length " + std::to_string(n) + " outside 0.." + std::to_string(shape_.n_ctx));
  }
  lengths_[seq] = n;
}

void KvCache::clear() { std::fill(lengths_.begin(), lengths_.end(), 0); }

void KvCache::remove_suffix(int seq, int n) {
  check_sequence(seq, "KV cache remove_suffix");
  if (n < 0 || n > lengths_[seq]) {
    throw Error(ErrorCode::kInvalidArgument, "cannot keep " + std::to_string(n) + " positions of sequence " +
                                                 std::to_string(seq) + ", which holds " +
                                                 std::to_string(lengths_[seq]));
  }
  lengths_[seq] = n;
}

ggml_tensor* KvCache::k_prefix(ggml_context* ctx, int seq, int n) const {
  return ggml_view_2d(ctx, k_, static_cast<int64_t>(n) * shape_.n_embd, shape_.n_layer, layer_bytes(),
                      seq * sequence_bytes());
}

ggml_tensor* KvCache::v_prefix(ggml_context* ctx, int seq, int n) const {
  return ggml_view_3d(ctx, v_, n, shape_.n_embd, shape_.n_layer, shape_.n_ctx * element_size(), layer_bytes(),
                      seq * sequence_bytes());
}

// Sources that some move overwrites are first copied out whole, then every
// destination written: swaps and cycles never read a sequence already
// overwritten (nodes run in graph order). Same-type copies of contiguous rows.
void KvCache::build_moves(ggml_context* ctx, ggml_cgraph* graph, std::span<const Move> moves) const {
  std::vector<std::pair<ggml_tensor*, ggml_tensor*>> saved(capacity_, {nullptr, nullptr});
  for (const Move& m : moves) {
    const bool overwritten = std::any_of(moves.begin(), moves.end(), [&](const Move& o) { return o.dst == m.src; });
    if (!overwritten || saved[m.src].first) continue;
    ggml_tensor* k = ggml_cpy(ctx, k_prefix(ctx, m.src, m.n),
                              ggml_new_tensor_2d(ctx, shape_.type, int64_t(m.n) * shape_.n_embd, shape_.n_layer));
    ggml_tensor* v = ggml_cpy(ctx, v_prefix(ctx, m.src, m.n),
                              ggml_new_tensor_3d(ctx, shape_.type, m.n, shape_.n_embd, shape_.n_layer));
    ggml_build_forward_expand(graph, k);
    ggml_build_forward_expand(graph, v);
    saved[m.src] = {k, v};
  }
  for (const Move& m : moves) {
    ggml_tensor* k = saved[m.src].first ? saved[m.src].first : k_prefix(ctx, m.src, m.n);
    ggml_tensor* v = saved[m.src].second ? saved[m.src].second : v_prefix(ctx, m.src, m.n);
    ggml_build_forward_expand(graph, ggml_cpy(ctx, k, k_prefix(ctx, m.dst, m.n)));
    ggml_build_forward_expand(graph, ggml_cpy(ctx, v, v_prefix(ctx, m.dst, m.n)));
  }
}

void KvCache::copy(int src, int dst) {
  check_sequence(src, "KV cache copy");
  check_sequence(dst, "KV cache copy");
  if (src == dst) return;
  std::vector<int> source(capacity_);
  for (int s = 0; s < capacity_; ++s) source[s] = s;
  source[dst] = src;
  reorder(source);
}

void KvCache::reorder(std::span<const int> source) {
  if (static_cast<int>(source.size()) > capacity_) {
    throw Error(ErrorCode::kInvalidArgument, "KV cache reorder got " + std::to_string(source.size()) + " sources for " +
                                                 std::to_string(capacity_) + " sequences");
  }
  for (int src : source) check_sequence(src, "KV cache reorder");
  std::vector<Move> moves;
  for (int s = 0; s < static_cast<int>(source.size()); ++s) {
    // An empty source moves no data: the destination just becomes empty.
    if (source[s] != s && lengths_[source[s]] > 0) moves.push_back({source[s], s, lengths_[source[s]]});
  }
  if (!moves.empty()) {
    const GraphRunner::Graph g = runner_->begin(max_graph_nodes());
    build_moves(g.ctx(), g.graph(), moves);
    runner_->allocate(g);
    runner_->compute(g);
  }
  std::vector<int> lengths = lengths_;
  for (int s = 0; s < static_cast<int>(source.size()); ++s) lengths[s] = lengths_[source[s]];
  lengths_ = std::move(lengths);
}

void KvCache::check_scratch_range(int seq, int first, int n) const {
  check_sequence(seq, "KV cache scratch");
  if (n < 1 || n > shape_.n_scratch || first < 0 || first + n > shape_.n_ctx) {
    throw Error(ErrorCode::kInvalidArgument, "KV cache scratch: positions " + std::to_string(first) + ".." +
                                                 std::to_string(first + n - 1) + " do not fit the " +
                                                 std::to_string(shape_.n_scratch) + " scratch positions or the " +
                                                 std::to_string(shape_.n_ctx) + " of a sequence");
  }
}

void KvCache::save_to_scratch(int seq, int first, int n) { scratch_copy(seq, first, n, /*restore=*/false); }
void KvCache::restore_from_scratch(int seq, int first, int n) { scratch_copy(seq, first, n, /*restore=*/true); }

void KvCache::scratch_copy(int seq, int first, int n, bool restore) {
  check_scratch_range(seq, first, n);
  const GraphRunner::Graph g = runner_->begin(max_graph_nodes());
  ggml_context* ctx = g.ctx();
  ggml_cgraph* graph = g.graph();
  const size_t es = element_size();
  const size_t at = seq * sequence_bytes();
  ggml_tensor* k = ggml_view_2d(ctx, k_, int64_t(n) * shape_.n_embd, shape_.n_layer, layer_bytes(),
                                at + static_cast<size_t>(first) * shape_.n_embd * es);
  ggml_tensor* v =
      ggml_view_3d(ctx, v_, n, shape_.n_embd, shape_.n_layer, shape_.n_ctx * es, layer_bytes(), at + first * es);
  ggml_tensor* ks = ggml_view_2d(ctx, k_scratch_, int64_t(n) * shape_.n_embd, shape_.n_layer, k_scratch_->nb[2], 0);
  ggml_tensor* vs =
      ggml_view_3d(ctx, v_scratch_, n, shape_.n_embd, shape_.n_layer, v_scratch_->nb[1], v_scratch_->nb[2], 0);
  ggml_build_forward_expand(graph, restore ? ggml_cpy(ctx, ks, k) : ggml_cpy(ctx, k, ks));
  ggml_build_forward_expand(graph, restore ? ggml_cpy(ctx, vs, v) : ggml_cpy(ctx, v, vs));
  runner_->allocate(g);
  runner_->compute(g);
}

ggml_tensor* KvCache::k_slot(ggml_context* ctx, int layer, int pos, int n_pos, int first_seq, int n_seq) const {
  const size_t es = element_size();
  return ggml_view_3d(
      ctx, k_, shape_.n_embd, n_pos, n_seq, shape_.n_embd * es, sequence_bytes(),
      layer * layer_bytes() + first_seq * sequence_bytes() + static_cast<size_t>(pos) * shape_.n_embd * es);
}

ggml_tensor* KvCache::v_slot(ggml_context* ctx, int layer, int pos, int n_pos, int first_seq, int n_seq) const {
  const size_t es = element_size();
  return ggml_view_3d(ctx, v_, n_pos, shape_.n_embd, n_seq, shape_.n_ctx * es, sequence_bytes(),
                      layer * layer_bytes() + first_seq * sequence_bytes() + static_cast<size_t>(pos) * es);
}

ggml_tensor* KvCache::k_heads(ggml_context* ctx, int layer, int n_kv, int n_head, int first_seq, int n_seq) const {
  const size_t es = element_size();
  const int head_dim = shape_.n_embd / n_head;
  return ggml_view_4d(ctx, k_, head_dim, n_kv, n_head, n_seq, shape_.n_embd * es, head_dim * es, sequence_bytes(),
                      layer * layer_bytes() + first_seq * sequence_bytes());
}

ggml_tensor* KvCache::v_heads(ggml_context* ctx, int layer, int n_kv, int n_head, int first_seq, int n_seq) const {
  const size_t es = element_size();
  const int head_dim = shape_.n_embd / n_head;
  return ggml_view_4d(ctx, v_, n_kv, head_dim, n_head, n_seq, shape_.n_ctx * es, shape_.n_ctx * head_dim * es,
                      sequence_bytes(), layer * layer_bytes() + first_seq * sequence_bytes());
}

}  // namespace earshot::runtime

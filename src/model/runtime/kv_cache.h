// A self-attention KV cache for decoder models: layers x sequences x positions
// of K and V on one ggml backend, with per-sequence lengths and operations
// (remove a suffix, copy, reorder, save/restore positions through a scratch
// sequence). Every data movement is a graph of copies run on the cache's own
// backend, so on a GPU the cache never crosses to the host. Model-neutral: a
// model's graph builders read and write it through the views below, and the
// model's session keeps one per stream.
//
// Layout (per layer, then per sequence): K rows of n_embd per position; V stored
// transposed (n_embd rows of n_ctx positions), as attention without fused ops reads
// it (whisper.cpp's layout). Not thread-safe: one stream's thread at a time.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/runtime/graph_runner.h"

namespace earshot::runtime {

struct KvCacheShape {
  int n_layer = 0;
  int n_embd = 0;  // K and V width of a layer: heads x head size
  int n_ctx = 0;   // positions per sequence
  ggml_type type = GGML_TYPE_F16;
  int n_scratch = 1;  // positions the scratch sequence holds
};

class KvCache {
 public:
  // The backend is borrowed (the session owns it) and must outlive the cache.
  KvCache(ggml_backend_t backend, const KvCacheShape& shape, int n_sequences = 1);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const { return shape_; }
  // Sequences the storage holds (the scratch sequence aside).
  int capacity() const { return capacity_; }
  // Makes room for n_sequences; growing reallocates and empties every sequence.
  // Also reserves the memory of the largest reorder, so later operations never allocate.
  void reserve(int n_sequences);

  // Positions held by a sequence.
  int length(int seq) const;
  // After a graph wrote positions [length, n) of seq through k_slot/v_slot.
  void set_length(int seq, int n);
  // Empties every sequence (no data is touched: positions past a length are never read).
  void clear();
  // Keeps the first `n` positions of seq.
  void remove_suffix(int seq, int n);
  // dst becomes a copy of src (its positions and length).
  void copy(int src, int dst);
  // Sequence i becomes what sequence source[i] was, for i < source.size(), in one
  // graph: swaps, cycles and fan-outs (several from one source) all work.
  void reorder(std::span<const int> source);
  // Scratch positions [0, n) take seq's positions [first, first + n), or back:
  // a step that must overwrite a slot and leave the cache as it was (language
  // detection) saves the slot, runs, and restores it.
  void save_to_scratch(int seq, int first, int n);
  void restore_from_scratch(int seq, int first, int n);

  // Views for graph builders (no copies). Writes: K [n_embd, n_pos, n_seq] and V
  // [n_pos, n_embd, n_seq] (transposed), positions [pos, pos + n_pos) of sequences
  // [first_seq, first_seq + n_seq) of one layer; ggml_cpy the new K/V into them.
  ggml_tensor* k_slot(ggml_context* ctx, int layer, int pos, int n_pos, int first_seq, int n_seq) const;
  ggml_tensor* v_slot(ggml_context* ctx, int layer, int pos, int n_pos, int first_seq, int n_seq) const;
  // Reads, split into n_head heads: K [head_dim, n_kv, n_head, n_seq] and V
  // [n_kv, head_dim, n_head, n_seq], positions [0, n_kv).
  ggml_tensor* k_heads(ggml_context* ctx, int layer, int n_kv, int n_head, int first_seq, int n_seq) const;
  ggml_tensor* v_heads(ggml_context* ctx, int layer, int n_kv, int n_head, int first_seq, int n_seq) const;

  // The backing tensors (for checks such as the ops a device supports).
  ggml_tensor* k() const { return k_; }
  ggml_tensor* v() const { return v_; }

 private:
  struct Move {
    int src, dst, n;
  };
  void allocate(int n_sequences);
  void check_sequence(int seq, const char* what) const;
  void check_scratch_range(int seq, int first, int n) const;
  void scratch_copy(int seq, int first, int n, bool restore);
  size_t element_size() const;
  size_t sequence_bytes() const;  // one (layer, sequence) block of K (or V)
  size_t layer_bytes() const;     // every sequence of one layer
  // K and V positions [0, n) of seq, every layer at once: K [n * n_embd, n_layer], V [n, n_embd, n_layer].
  ggml_tensor* k_prefix(ggml_context* ctx, int seq, int n) const;
  ggml_tensor* v_prefix(ggml_context* ctx, int seq, int n) const;
  void build_moves(ggml_context* ctx, ggml_cgraph* graph, std::span<const Move> moves) const;
  int max_graph_nodes() const;  // of a copy graph over every sequence

  ggml_backend_t backend_;
  KvCacheShape shape_;
  int capacity_ = 0;
  std::vector<int> lengths_;
  ggml_context* ctx_ = nullptr;
  ggml_backend_buffer_t buffer_ = nullptr;
  ggml_tensor* k_ = nullptr;
  ggml_tensor* v_ = nullptr;
  ggml_tensor* k_scratch_ = nullptr;     // [n_embd, n_scratch, n_layer]
  ggml_tensor* v_scratch_ = nullptr;     // [n_scratch, n_embd, n_layer] (transposed, as V)
  std::unique_ptr<GraphRunner> runner_;  // the copies (and the temporaries of reorders)
};

}  // namespace earshot::runtime

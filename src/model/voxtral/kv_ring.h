// A sliding-window attention cache for one stream: every layer's K and V of the
// last `capacity` positions, position p in slot p % capacity (RoPE is applied
// before K is stored, so slots need no order: a mask per query says which slots
// hold a position inside its window). Memory is bounded by the window whatever
// the stream's length; the ring starts small and doubles up to its limit as
// positions arrive (the slots written so far keep their places), so a short
// stream holds a short cache. Not thread-safe: one stream's thread at a time.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <cstdint>
#include <vector>

namespace earshot::voxtral {

class KvRing {
 public:
  // dim: K and V width of a layer (heads x head size). max_capacity >= the
  // window plus the most positions one graph stores.
  KvRing(ggml_backend_t backend, int n_layer, int dim, int max_capacity, ggml_type type, int initial_capacity = 64);
  ~KvRing();
  KvRing(const KvRing&) = delete;
  KvRing& operator=(const KvRing&) = delete;

  int capacity() const { return capacity_; }
  int max_capacity() const { return max_capacity_; }
  // Positions stored since the last reset (the next one is this).
  int64_t positions() const { return positions_; }
  ggml_type type() const { return type_; }
  size_t bytes() const;
  // Forgets every position (a new context). Keeps the memory.
  void reset() { positions_ = 0; }

  // Makes room for `n` more positions (grows the ring up to its limit; throws
  // Error(kInternal) when n alone exceeds max_capacity).
  void reserve(int n);
  // Graph ops storing k_new and v_new [dim, n] (any float type) as positions
  // [positions(), positions() + n) of `layer` (one copy, or two where the ring wraps).
  void store(ggml_context* ctx, ggml_cgraph* graph, int layer, ggml_tensor* k_new, ggml_tensor* v_new) const;
  // K and V of a layer as flash attention reads them: [head_dim, capacity, n_head].
  ggml_tensor* k_view(ggml_context* ctx, int layer, int head_dim) const;
  ggml_tensor* v_view(ggml_context* ctx, int layer, int head_dim) const;
  // After a graph that stored n positions computed.
  void advance(int n) { positions_ += n; }

  // The ring's positions as they stand: every layer's K and V of its slots in use
  // (all of them once it wrapped), for restore().
  struct Saved {
    int64_t positions = 0;
    int capacity = 0;
    std::vector<uint8_t> bytes;
  };
  Saved save() const;
  // A new context holding what save() gave, from this ring (or one of the same
  // layers, width, type and limit): positions() as then.
  void restore(const Saved& saved);

  // The attention mask of queries at positions [positions(), positions() + n)
  // once they are stored: [n][capacity] f16 (row per query), 0 where the slot
  // holds a position p with q - window < p <= q, -inf elsewhere.
  void mask(int n, int window, std::vector<ggml_fp16_t>& out) const;
  // That mask written into a graph's f16 input [capacity, n] (`scratch` holds it
  // on the way); throws Error(kInternal) when the input is of another size.
  void set_mask(ggml_tensor* input, int n, int window, std::vector<ggml_fp16_t>& scratch) const;

 private:
  void allocate(int capacity);

  ggml_backend_t backend_;
  int n_layer_, dim_, max_capacity_;
  ggml_type type_;
  int capacity_ = 0;
  int64_t positions_ = 0;
  ggml_context* ctx_ = nullptr;
  ggml_backend_buffer_t buffer_ = nullptr;
  std::vector<ggml_tensor*> k_, v_;  // per layer [dim, capacity]
};

}  // namespace earshot::voxtral

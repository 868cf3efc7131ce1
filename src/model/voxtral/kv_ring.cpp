#include "model/voxtral/kv_ring.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace earshot::voxtral {

KvRing::KvRing(ggml_backend_t backend, int n_layer, int dim, int max_capacity, ggml_type type, int initial_capacity)
    : backend_(backend), n_layer_(n_layer), dim_(dim), max_capacity_(max_capacity), type_(type) {
  allocate(std::min(std::max(initial_capacity, 1), max_capacity));
}

KvRing::~KvRing() {
  if (buffer_) ggml_backend_buffer_free(buffer_);
  if (ctx_) ggml_free(ctx_);
}

size_t KvRing::bytes() const { return buffer_ ? ggml_backend_buffer_get_size(buffer_) : 0; }

void KvRing::allocate(int capacity) {
  ggml_init_params params{static_cast<size_t>(2 * n_layer_ + 2) * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(params);
  std::vector<ggml_tensor*> k(n_layer_), v(n_layer_);
  for (int l = 0; l < n_layer_; ++l) {
    k[l] = ggml_new_tensor_2d(ctx, type_, dim_, capacity);
    v[l] = ggml_new_tensor_2d(ctx, type_, dim_, capacity);
  }
  ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend_);
  if (!buffer) {
    ggml_free(ctx);
    throw Error(ErrorCode::kUnsupported, "cannot allocate a Voxtral attention cache of " + std::to_string(capacity) +
                                             " positions (out of memory?)");
  }
  // The slots written so far keep their places: every position is below the old
  // capacity, so p % capacity is p in both rings.
  const int64_t kept = std::min<int64_t>(positions_, capacity_);
  if (kept > 0) {
    std::vector<uint8_t> tmp;
    for (int l = 0; l < n_layer_; ++l)
      for (auto [from, to] : {std::pair{k_[l], k[l]}, std::pair{v_[l], v[l]}}) {
        tmp.resize(from->nb[1] * static_cast<size_t>(kept));
        ggml_backend_tensor_get(from, tmp.data(), 0, tmp.size());
        ggml_backend_tensor_set(to, tmp.data(), 0, tmp.size());
      }
  }
  if (buffer_) ggml_backend_buffer_free(buffer_);
  if (ctx_) ggml_free(ctx_);
  ctx_ = ctx;
  buffer_ = buffer;
  k_ = std::move(k);
  v_ = std::move(v);
  capacity_ = capacity;
}

KvRing::Saved KvRing::save() const {
  Saved saved{positions_, capacity_, {}};
  const size_t part = k_[0]->nb[1] * static_cast<size_t>(std::min<int64_t>(positions_, capacity_));
  saved.bytes.resize(part * 2 * static_cast<size_t>(n_layer_));
  for (int l = 0; l < n_layer_; ++l) {
    ggml_backend_tensor_get(k_[l], saved.bytes.data() + (2 * l) * part, 0, part);
    ggml_backend_tensor_get(v_[l], saved.bytes.data() + (2 * l + 1) * part, 0, part);
  }
  return saved;
}

void KvRing::restore(const Saved& saved) {
  const int64_t slots = std::min<int64_t>(saved.positions, saved.capacity);
  positions_ = 0;
  reserve(static_cast<int>(slots));
  // Position p sits in slot p % capacity: unwrapped, the same slots in any
  // capacity; wrapped, the ring was at its limit, as this one then is.
  const size_t part = k_[0]->nb[1] * static_cast<size_t>(slots);
  if (saved.bytes.size() != part * 2 * static_cast<size_t>(n_layer_) ||
      (saved.positions > saved.capacity && capacity_ != saved.capacity))
    throw Error(ErrorCode::kInternal, "KvRing::restore: positions saved from another ring");
  for (int l = 0; l < n_layer_; ++l) {
    ggml_backend_tensor_set(k_[l], saved.bytes.data() + (2 * l) * part, 0, part);
    ggml_backend_tensor_set(v_[l], saved.bytes.data() + (2 * l + 1) * part, 0, part);
  }
  positions_ = saved.positions;
}

void KvRing::reserve(int n) {
  if (n > max_capacity_) throw Error(ErrorCode::kInternal, "KvRing: a graph stores more positions than the ring holds");
  const int64_t needed = positions_ + n;
  if (needed <= capacity_ || capacity_ == max_capacity_) return;
  int grown = capacity_;
  while (grown < needed && grown < max_capacity_) grown *= 2;
  allocate(std::min(grown, max_capacity_));
}

void KvRing::store(ggml_context* ctx, ggml_cgraph* graph, int layer, ggml_tensor* k_new, ggml_tensor* v_new) const {
  const int64_t n = k_new->ne[1];
  const int64_t first = positions_ % capacity_;
  const int64_t n1 = std::min<int64_t>(n, capacity_ - first);
  auto put = [&](ggml_tensor* src, ggml_tensor* ring, int64_t src_from, int64_t slot, int64_t count) {
    ggml_tensor* from = ggml_view_2d(ctx, src, dim_, count, src->nb[1], static_cast<size_t>(src_from) * src->nb[1]);
    ggml_tensor* to = ggml_view_2d(ctx, ring, dim_, count, ring->nb[1], static_cast<size_t>(slot) * ring->nb[1]);
    ggml_build_forward_expand(graph, ggml_cpy(ctx, from, to));
  };
  for (auto [src, ring] : {std::pair{k_new, k_[layer]}, std::pair{v_new, v_[layer]}}) {
    put(src, ring, 0, first, n1);
    if (n1 < n) put(src, ring, n1, 0, n - n1);
  }
}

ggml_tensor* KvRing::k_view(ggml_context* ctx, int layer, int head_dim) const {
  const ggml_tensor* t = k_[layer];
  return ggml_view_3d(ctx, k_[layer], head_dim, capacity_, dim_ / head_dim, t->nb[1], ggml_row_size(type_, head_dim),
                      0);
}

ggml_tensor* KvRing::v_view(ggml_context* ctx, int layer, int head_dim) const {
  const ggml_tensor* t = v_[layer];
  return ggml_view_3d(ctx, v_[layer], head_dim, capacity_, dim_ / head_dim, t->nb[1], ggml_row_size(type_, head_dim),
                      0);
}

void KvRing::mask(int n, int window, std::vector<ggml_fp16_t>& out) const {
  const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), minus_inf = ggml_fp32_to_fp16(-INFINITY);
  out.assign(static_cast<size_t>(n) * capacity_, minus_inf);
  const int64_t end = positions_ + n;  // positions stored once the graph's are in
  for (int s = 0; s < capacity_; ++s) {
    // The latest position p < end with p % capacity == s.
    const int64_t last = end - 1;
    const int64_t p = last - ((last - s) % capacity_ + capacity_) % capacity_;
    if (p < 0) continue;
    for (int i = 0; i < n; ++i) {
      const int64_t q = positions_ + i;
      if (p <= q && p > q - window) out[static_cast<size_t>(i) * capacity_ + s] = zero;
    }
  }
}

void KvRing::set_mask(ggml_tensor* input, int n, int window, std::vector<ggml_fp16_t>& scratch) const {
  mask(n, window, scratch);
  const size_t bytes = scratch.size() * sizeof(ggml_fp16_t);
  if (bytes != ggml_nbytes(input))
    throw Error(ErrorCode::kInternal, "a mask of " + std::to_string(bytes) + " bytes for " + ggml_get_name(input) +
                                          " (" + std::to_string(ggml_nbytes(input)) + " bytes)");
  ggml_backend_tensor_set(input, scratch.data(), 0, bytes);
}

}  // namespace earshot::voxtral

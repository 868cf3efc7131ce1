#include "model/llm/attention_capture.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace earshot::llm {

namespace {
// ggml's F32 softmax sums to 1 within a few ulps per element; 1e-4 leaves room
// for long rows and still catches a wrong layout or a missing head.
constexpr double kRowSumTolerance = 1e-4;

// The whole string as a non-negative int, else -1.
int trailing_int(std::string_view digits) {
  int value = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() ? value : -1;
}

// The layer of a K cache view's name ("cache_k_l12 (view) (permuted)"), else -1.
int cache_layer(std::string_view name) {
  if (!name.starts_with(kKeyCachePrefix)) return -1;
  name.remove_prefix(kKeyCachePrefix.size());
  const std::size_t digits = name.find_first_not_of("0123456789");
  return trailing_int(name.substr(0, digits));
}

// The flash-attention node's K operand; an F32 cache reaches it through a cast
// to F16 (ggml_cast, a CPY node), and the capture reads the cache behind it.
const ggml_tensor* key_operand(const ggml_tensor* attention) {
  const ggml_tensor* k = attention->src[1];
  if (k != nullptr && k->op == GGML_OP_CPY && k->src[0] != nullptr) k = k->src[0];
  return k;
}

// The tensor's bytes (its whole strided extent): in place on a host buffer, else
// copied into `copy`.
const char* host_bytes(const ggml_tensor* t, std::vector<char>& copy) {
  if (t->buffer == nullptr || ggml_backend_buffer_is_host(t->buffer)) return static_cast<const char*>(t->data);
  copy.resize(ggml_nbytes(t));
  ggml_backend_tensor_get(t, copy.data(), 0, copy.size());
  return copy.data();
}
}  // namespace

AttentionRoute parse_attention_route(std::string_view name) {
  if (name == "softmax") return AttentionRoute::kSoftmax;
  if (name == "qk") return AttentionRoute::kQk;
  throw Error(
      ErrorCode::kInvalidArgument,
      "unknown attention route '" + std::string(name) +
          "': softmax (read the softmax, flash attention off) or qk (recompute from Q and K, flash attention on)");
}

std::string_view attention_route_name(AttentionRoute route) { return route == AttentionRoute::kQk ? "qk" : "softmax"; }

void AttentionCapture::set(std::vector<AttentionHead> heads, int column_begin, int column_end) {
  for (const AttentionHead& h : heads) {
    if (h.layer < 0 || h.head < 0) {
      throw Error(ErrorCode::kInvalidArgument, "attention capture: layer " + std::to_string(h.layer) + ", head " +
                                                   std::to_string(h.head) + " is not a (layer, head) pair");
    }
  }
  if (!heads.empty() && (column_begin < 0 || column_end <= column_begin)) {
    throw Error(ErrorCode::kInvalidArgument, "attention capture: column span [" + std::to_string(column_begin) + ", " +
                                                 std::to_string(column_end) + ") is empty or negative");
  }
  heads_ = std::move(heads);
  layers_.clear();
  for (const AttentionHead& h : heads_) layers_.push_back(h.layer);
  std::sort(layers_.begin(), layers_.end());
  layers_.erase(std::unique(layers_.begin(), layers_.end()), layers_.end());
  column_begin_ = column_begin;
  column_end_ = column_end;
}

void AttentionCapture::begin_decode(int first_position, int n_tokens) {
  first_position_ = first_position;
  n_tokens_ = n_tokens;
  tokens_done_.assign(layers_.size(), 0);
  values_.assign(static_cast<std::size_t>(n_tokens) * heads_.size() * std::max(column_end_ - column_begin_, 0), 0.0f);
  error_.clear();
  seen_names_.clear();
}

AttentionRows AttentionCapture::finish() {
  AttentionRows rows;
  if (!error_.empty()) throw Error(ErrorCode::kInternal, error_);
  if (!active()) return rows;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (tokens_done_[i] != n_tokens_) {
      const std::string layer = std::to_string(layers_[i]);
      const std::string what = route_ == AttentionRoute::kQk
                                   ? "flash-attention node over '" + std::string(kKeyCachePrefix) + layer + "'"
                                   : "'" + std::string(kSoftmaxTensorPrefix) + layer + "'";
      const std::string hint = route_ == AttentionRoute::kQk ? "is flash attention off" : "is flash attention on";
      throw Error(ErrorCode::kInternal, "attention capture: llama.cpp produced no " + what + " for " +
                                            std::to_string(n_tokens_ - tokens_done_[i]) + " of " +
                                            std::to_string(n_tokens_) + " tokens (" + hint +
                                            ", or did this llama.cpp rename its attention tensors?)");
    }
  }
  rows.n_tokens = n_tokens_;
  rows.n_heads = static_cast<int>(heads_.size());
  rows.column_begin = column_begin_;
  rows.column_end = column_end_;
  rows.values = std::move(values_);
  values_.clear();
  return rows;
}

bool AttentionCapture::wants(const ggml_tensor* tensor, int* layer) const {
  int value = -1;
  if (route_ == AttentionRoute::kQk) {
    if (tensor->op != GGML_OP_FLASH_ATTN_EXT || tensor->src[0] == nullptr || key_operand(tensor) == nullptr ||
        (value = cache_layer(key_operand(tensor)->name)) < 0)
      return false;
  } else {
    const std::string_view name(tensor->name);
    if (!name.starts_with(kSoftmaxTensorPrefix)) return false;
    value = trailing_int(name.substr(kSoftmaxTensorPrefix.size()));
  }
  if (!std::binary_search(layers_.begin(), layers_.end(), value)) return false;
  *layer = value;
  return true;
}

void AttentionCapture::fail(std::string message) {
  if (error_.empty()) error_ = "attention capture: " + std::move(message);
}

bool AttentionCapture::store_row(const std::string& name, const float* row, int64_t n_kv, int64_t position, int token,
                                 std::size_t head_index) {
  if (position >= n_kv) {
    fail(name + ": position " + std::to_string(position) + " beyond n_kv " + std::to_string(n_kv) +
         " (KV cell != position)");
    return false;
  }
  double sum = 0.0;
  for (int64_t j = 0; j <= position; ++j) sum += row[j];
  for (int64_t j = position + 1; j < n_kv; ++j) {
    if (row[j] != 0.0f) {
      fail(name + ": token at position " + std::to_string(position) + " attends to cell " + std::to_string(j) +
           " (KV cell != position: did the cache wrap or hold another sequence?)");
      return false;
    }
  }
  if (std::abs(sum - 1.0) > kRowSumTolerance) {
    fail(name + ": row of position " + std::to_string(position) + " sums to " + std::to_string(sum));
    return false;
  }
  const int n_columns = column_end_ - column_begin_;
  float* out = values_.data() + (static_cast<std::size_t>(token) * heads_.size() + head_index) * n_columns;
  for (int c = 0; c < n_columns; ++c) {
    const int64_t j = column_begin_ + c;
    out[c] = j < n_kv ? row[j] : 0.0f;  // cells past n_kv are unused, i.e. masked
  }
  return true;
}

void AttentionCapture::take(const ggml_tensor* t, int layer, int stream) {
  const std::string name(t->name);
  if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || stream >= t->ne[3]) {
    return fail(name + " is not a contiguous F32 [n_kv, n_tokens, n_head, n_stream] tensor with stream " +
                std::to_string(stream));
  }
  const int64_t n_kv = t->ne[0];
  const int64_t n_ub = t->ne[1];  // tokens of this ubatch
  const int64_t n_head = t->ne[2];
  const std::size_t slot = std::lower_bound(layers_.begin(), layers_.end(), layer) - layers_.begin();
  const int token_offset = tokens_done_[slot];
  if (token_offset + n_ub > n_tokens_) return fail(name + " holds more tokens than were decoded");
  // One transfer per head: the head's rows are contiguous, and the invariants
  // need whole rows, not only the captured span.
  scratch_.resize(static_cast<std::size_t>(n_kv * n_ub));
  for (std::size_t hi = 0; hi < heads_.size(); ++hi) {
    if (heads_[hi].layer != layer) continue;
    const int64_t head = heads_[hi].head;
    if (head >= n_head)
      return fail(name + " has " + std::to_string(n_head) + " heads, asked for head " + std::to_string(head));
    ggml_backend_tensor_get(
        t, scratch_.data(),
        static_cast<std::size_t>(head * n_kv * n_ub) * sizeof(float) + static_cast<std::size_t>(stream) * t->nb[3],
        scratch_.size() * sizeof(float));
    for (int64_t tok = 0; tok < n_ub; ++tok) {
      const int64_t position = first_position_ + token_offset + tok;
      if (!store_row(name, scratch_.data() + tok * n_kv, n_kv, position, static_cast<int>(token_offset + tok), hi))
        return;
    }
  }
  tokens_done_[slot] += static_cast<int>(n_ub);
}

void AttentionCapture::take_qk(const ggml_tensor* attention, int layer, int stream) {
  const ggml_tensor* q = attention->src[0];
  const ggml_tensor* k = key_operand(attention);
  const ggml_tensor* mask = attention->src[3];
  const std::string name = std::string("flash attention of layer ") + std::to_string(layer);
  float params[3];  // scale, max_bias (ALiBi), logit softcap: ggml_flash_attn_ext's op_params
  std::memcpy(params, attention->op_params, sizeof params);
  float scale = params[0];
  const float softcap = params[2];
  if (params[1] != 0.0f) return fail(name + " uses ALiBi, which the Q/K capture does not recompute");
  if (attention->src[4] != nullptr)
    return fail(name + " has attention sinks, which the Q/K capture does not recompute");
  if (q->type != GGML_TYPE_F32 || q->nb[0] != sizeof(float) || stream >= q->ne[3] || k->ne[3] != q->ne[3])
    return fail(name + ": Q is not an F32 [head_dim, n_tokens, n_head, n_stream] operand with stream " +
                std::to_string(stream));
  if (k->nb[0] != ggml_type_size(k->type) || k->ne[0] % ggml_blck_size(k->type) != 0)
    return fail(name + ": K rows are not contiguous");
  if (mask != nullptr && (mask->type != GGML_TYPE_F16 && mask->type != GGML_TYPE_F32))
    return fail(name + ": the mask is neither F16 nor F32");
  const int64_t dim = q->ne[0];
  const int64_t n_ub = q->ne[1];
  const int64_t n_head = q->ne[2];
  const int64_t n_kv = k->ne[1];
  const int64_t n_head_kv = k->ne[2];
  if (k->ne[0] != dim || n_head_kv <= 0 || n_head % n_head_kv != 0)
    return fail(name + ": Q and K shapes do not match (" + std::to_string(n_head) + " query heads over " +
                std::to_string(n_head_kv) + " KV heads)");
  if (mask != nullptr && (mask->ne[0] < n_kv || mask->ne[1] < n_ub))
    return fail(name + ": the mask is smaller than n_kv x n_tokens");
  const std::size_t slot = std::lower_bound(layers_.begin(), layers_.end(), layer) - layers_.begin();
  const int token_offset = tokens_done_[slot];
  if (token_offset + n_ub > n_tokens_) return fail(name + " holds more tokens than were decoded");

  const char* qb = host_bytes(q, q_bytes_) + stream * q->nb[3];
  const char* kb = host_bytes(k, k_bytes_) + stream * k->nb[3];
  const char* mb = mask != nullptr ? host_bytes(mask, mask_bytes_) + (stream % mask->ne[3]) * mask->nb[3] : nullptr;
  const ggml_to_float_t to_float = ggml_get_type_traits(k->type)->to_float;
  if (k->type != GGML_TYPE_F32 && to_float == nullptr)
    return fail(name + ": K of type " + ggml_type_name(k->type) + " cannot be read as F32");
  // As ggml computes it: the softcap divides the scale, then caps the scaled score.
  if (softcap != 0.0f) scale /= softcap;

  scratch_.resize(static_cast<std::size_t>(n_kv));
  std::vector<double> logits(static_cast<std::size_t>(n_kv));
  int64_t loaded_kv_head = -1;
  for (std::size_t hi = 0; hi < heads_.size(); ++hi) {
    if (heads_[hi].layer != layer) continue;
    const int64_t head = heads_[hi].head;
    if (head >= n_head)
      return fail(name + " has " + std::to_string(n_head) + " heads, asked for head " + std::to_string(head));
    const int64_t kv_head = head / (n_head / n_head_kv);
    if (kv_head != loaded_kv_head) {
      keys_.resize(static_cast<std::size_t>(n_kv * dim));
      for (int64_t j = 0; j < n_kv; ++j) {
        const char* row = kb + j * k->nb[1] + kv_head * k->nb[2];
        float* out = keys_.data() + j * dim;
        if (k->type == GGML_TYPE_F32)
          std::memcpy(out, row, static_cast<std::size_t>(dim) * sizeof(float));
        else
          to_float(row, out, dim);
      }
      loaded_kv_head = kv_head;
    }
    for (int64_t tok = 0; tok < n_ub; ++tok) {
      const float* qrow = reinterpret_cast<const float*>(qb + tok * q->nb[1] + head * q->nb[2]);
      const char* mrow = mb != nullptr ? mb + tok * mask->nb[1] + (head % mask->ne[2]) * mask->nb[2] : nullptr;
      double max = -INFINITY;
      for (int64_t j = 0; j < n_kv; ++j) {
        const float* key = keys_.data() + j * dim;
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(qrow[d]) * key[d];
        double s = dot * scale;
        if (softcap != 0.0f) s = softcap * std::tanh(s);
        if (mrow != nullptr) {
          s += mask->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(reinterpret_cast<const ggml_fp16_t*>(mrow)[j])
                                           : reinterpret_cast<const float*>(mrow)[j];
        }
        logits[j] = s;
        max = std::max(max, s);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n_kv; ++j) {
        logits[j] = max == -INFINITY ? 0.0 : std::exp(logits[j] - max);
        sum += logits[j];
      }
      for (int64_t j = 0; j < n_kv; ++j) scratch_[j] = static_cast<float>(sum > 0.0 ? logits[j] / sum : 0.0);
      const int64_t position = first_position_ + token_offset + tok;
      if (!store_row(name, scratch_.data(), n_kv, position, static_cast<int>(token_offset + tok), hi)) return;
    }
  }
  tokens_done_[slot] += static_cast<int>(n_ub);
}

bool AttentionCapture::eval_callback(ggml_tensor* tensor, bool ask, void* user_data) {
  auto* self = static_cast<AttentionCapture*>(user_data);
  int layer = -1;
  if (ask) {
    if (self->record_names) {
      if (tensor->op == GGML_OP_FLASH_ATTN_EXT && tensor->src[0] != nullptr && key_operand(tensor) != nullptr) {
        self->seen_names_.push_back(std::string("flash_attn_ext(") + tensor->src[0]->name + ", " +
                                    key_operand(tensor)->name + ")");
      } else {
        self->seen_names_.emplace_back(tensor->name);
      }
    }
    return self->active() && self->wants(tensor, &layer);
  }
  // Exceptions must not cross ggml's C frames: errors are kept for finish().
  self->take_stream(tensor, 0);
  return true;
}

bool AttentionCapture::claims(const ggml_tensor* tensor) const {
  int layer = -1;
  return active() && wants(tensor, &layer);
}

void AttentionCapture::take_stream(const ggml_tensor* tensor, int stream) {
  int layer = -1;
  if (!active() || !wants(tensor, &layer)) return;
  if (route_ == AttentionRoute::kQk)
    take_qk(tensor, layer, stream);
  else
    take(tensor, layer, stream);
}

}  // namespace earshot::llm

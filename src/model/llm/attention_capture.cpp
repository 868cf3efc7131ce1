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
}  // namespace

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
      throw Error(ErrorCode::kInternal,
                  "attention capture: llama.cpp produced no '" + std::string(kSoftmaxTensorPrefix) +
                      std::to_string(layers_[i]) + "' for " + std::to_string(n_tokens_ - tokens_done_[i]) + " of " +
                      std::to_string(n_tokens_) +
                      " tokens (is flash attention on, or did this llama.cpp rename its attention tensors?)");
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
  const std::string_view name(tensor->name);
  if (!name.starts_with(kSoftmaxTensorPrefix)) return false;
  const std::string_view digits = name.substr(kSoftmaxTensorPrefix.size());
  int value = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  if (!std::binary_search(layers_.begin(), layers_.end(), value)) return false;
  *layer = value;
  return true;
}

void AttentionCapture::fail(std::string message) {
  if (error_.empty()) error_ = "attention capture: " + std::move(message);
}

void AttentionCapture::take(const ggml_tensor* t, int layer) {
  const std::string name(t->name);
  if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || t->ne[3] != 1) {
    return fail(name + " is not a contiguous F32 [n_kv, n_tokens, n_head] tensor");
  }
  const int64_t n_kv = t->ne[0];
  const int64_t n_ub = t->ne[1];  // tokens of this ubatch
  const int64_t n_head = t->ne[2];
  const std::size_t slot = std::lower_bound(layers_.begin(), layers_.end(), layer) - layers_.begin();
  const int token_offset = tokens_done_[slot];
  if (token_offset + n_ub > n_tokens_) return fail(name + " holds more tokens than were decoded");
  const int n_columns = column_end_ - column_begin_;
  // One transfer per head: the head's rows are contiguous, and the invariants
  // below need whole rows, not only the captured span.
  scratch_.resize(static_cast<std::size_t>(n_kv * n_ub));
  for (std::size_t hi = 0; hi < heads_.size(); ++hi) {
    if (heads_[hi].layer != layer) continue;
    const int64_t head = heads_[hi].head;
    if (head >= n_head)
      return fail(name + " has " + std::to_string(n_head) + " heads, asked for head " + std::to_string(head));
    ggml_backend_tensor_get(t, scratch_.data(), static_cast<std::size_t>(head * n_kv * n_ub) * sizeof(float),
                            scratch_.size() * sizeof(float));
    for (int64_t tok = 0; tok < n_ub; ++tok) {
      const float* row = scratch_.data() + tok * n_kv;
      const int64_t position = first_position_ + token_offset + tok;
      if (position >= n_kv)
        return fail(name + ": position " + std::to_string(position) + " beyond n_kv " + std::to_string(n_kv) +
                    " (KV cell != position)");
      double sum = 0.0;
      for (int64_t j = 0; j <= position; ++j) sum += row[j];
      for (int64_t j = position + 1; j < n_kv; ++j) {
        if (row[j] != 0.0f) {
          return fail(name + ": token at position " + std::to_string(position) + " attends to cell " +
                      std::to_string(j) + " (KV cell != position: did the cache wrap or hold another sequence?)");
        }
      }
      if (std::abs(sum - 1.0) > kRowSumTolerance) {
        return fail(name + ": row of position " + std::to_string(position) + " sums to " + std::to_string(sum));
      }
      float* out = values_.data() + ((token_offset + tok) * heads_.size() + hi) * n_columns;
      for (int c = 0; c < n_columns; ++c) {
        const int64_t j = column_begin_ + c;
        out[c] = j < n_kv ? row[j] : 0.0f;  // cells past n_kv are unused, i.e. masked
      }
    }
  }
  tokens_done_[slot] += static_cast<int>(n_ub);
}

bool AttentionCapture::eval_callback(ggml_tensor* tensor, bool ask, void* user_data) {
  auto* self = static_cast<AttentionCapture*>(user_data);
  int layer = -1;
  if (ask) {
    if (self->record_names) self->seen_names_.emplace_back(tensor->name);
    return self->active() && self->wants(tensor, &layer);
  }
  // Exceptions must not cross ggml's C frames: errors are kept for finish().
  if (self->wants(tensor, &layer)) self->take(tensor, layer);
  return true;
}

}  // namespace earshot::llm

#include "policy/alignatt/alignment.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/error.h"

namespace earshot::policy {

namespace {
constexpr double kStdEpsilon = 1e-8;

// Mean over heads of the median-filtered z-scores; argmax over [0, content_len).
// Only the cropped frames are filtered: the ones after the crop are never read.
int argmax_of_heads(const std::vector<std::vector<float>>& z_per_head, int n_frames, int content_len) {
  const int crop = std::clamp(content_len, 1, n_frames);
  std::vector<double> mean(crop, 0.0);
  for (const auto& z : z_per_head) {
    for (int f = 0; f < crop; ++f) mean[f] += median_filtered_at(z, f);
  }
  return static_cast<int>(std::max_element(mean.begin(), mean.end()) - mean.begin());
}
}  // namespace

float median_filtered_at(std::span<const float> row, int frame) {
  const int n = static_cast<int>(row.size());
  std::array<float, kMedianFilterWidth> w;
  for (int k = 0; k < kMedianFilterWidth; ++k) w[k] = row[std::clamp(frame - kMedianFilterWidth / 2 + k, 0, n - 1)];
  std::nth_element(w.begin(), w.begin() + kMedianFilterWidth / 2, w.end());
  return w[kMedianFilterWidth / 2];
}

void AlignmentAccumulator::reset() {
  blocks_.clear();
  total_sum_.clear();
  total_sum_squares_.clear();
  total_rows_ = 0;
  last_row_.clear();
  n_sequences_ = n_heads_ = n_frames_ = 0;
}

void AlignmentAccumulator::add(const DecodeResult& r) {
  if (r.attention.empty() || r.n_heads == 0 || r.n_tokens == 0) return;
  if (!blocks_.empty() && (r.n_sequences != n_sequences_ || r.n_heads != n_heads_ || r.n_frames != n_frames_)) {
    throw Error(ErrorCode::kInternal, "alignment attention changed shape within a pass");
  }
  n_sequences_ = r.n_sequences;
  n_heads_ = r.n_heads;
  n_frames_ = r.n_frames;
  Block block;
  block.rows = r.n_tokens;
  const size_t plane = static_cast<size_t>(n_sequences_) * n_heads_ * n_frames_;
  block.sum.assign(plane, 0.0);
  block.sum_squares.assign(plane, 0.0);
  last_row_.assign(plane, 0.0f);
  for (int s = 0; s < n_sequences_; ++s) {
    for (int h = 0; h < n_heads_; ++h) {
      const size_t base = (static_cast<size_t>(s) * n_heads_ + h) * n_frames_;
      for (int t = 0; t < r.n_tokens; ++t) {
        const float* row = r.attention_at(s, h, t);
        for (int f = 0; f < n_frames_; ++f) {
          block.sum[base + f] += row[f];
          block.sum_squares[base + f] += static_cast<double>(row[f]) * row[f];
        }
      }
      std::copy_n(r.attention_at(s, h, r.n_tokens - 1), n_frames_, last_row_.begin() + base);
    }
  }
  if (total_rows_ == 0) {
    total_sum_.assign(plane, 0.0);
    total_sum_squares_.assign(plane, 0.0);
  }
  for (size_t i = 0; i < plane; ++i) {
    total_sum_[i] += block.sum[i];
    total_sum_squares_[i] += block.sum_squares[i];
  }
  total_rows_ += block.rows;
  blocks_.push_back(std::move(block));
  while (static_cast<int>(blocks_.size()) > window_) {
    const Block& old = blocks_.front();
    for (size_t i = 0; i < plane; ++i) {
      total_sum_[i] -= old.sum[i];
      total_sum_squares_[i] -= old.sum_squares[i];
    }
    total_rows_ -= old.rows;
    blocks_.pop_front();
  }
}

void AlignmentAccumulator::reorder(std::span<const int> source) {
  if (blocks_.empty()) return;
  const size_t per_sequence = static_cast<size_t>(n_heads_) * n_frames_;
  auto permute = [&](auto& values) {
    auto copy = values;
    for (size_t i = 0; i < source.size(); ++i) {
      std::copy_n(copy.begin() + source[i] * per_sequence, per_sequence, values.begin() + i * per_sequence);
    }
  };
  for (Block& b : blocks_) {
    permute(b.sum);
    permute(b.sum_squares);
  }
  permute(last_row_);
  permute(total_sum_);
  permute(total_sum_squares_);
}

int AlignmentAccumulator::most_attended_frame(int sequence, int content_len) const {
  if (blocks_.empty()) return 0;
  const double rows = total_rows_;
  // Frames beyond crop + half the filter width never reach the result.
  const int needed = std::min(n_frames_, std::clamp(content_len, 1, n_frames_) + kMedianFilterWidth / 2);
  std::vector<std::vector<float>> z(n_heads_, std::vector<float>(needed));
  for (int h = 0; h < n_heads_; ++h) {
    const size_t base = (static_cast<size_t>(sequence) * n_heads_ + h) * n_frames_;
    for (int f = 0; f < needed; ++f) {
      const double mean = total_sum_[base + f] / rows;
      const double variance = std::max(0.0, total_sum_squares_[base + f] / rows - mean * mean);
      z[h][f] = static_cast<float>((last_row_[base + f] - mean) / (std::sqrt(variance) + kStdEpsilon));
    }
  }
  return argmax_of_heads(z, needed, content_len);
}

std::vector<int> most_attended_frames(std::span<const float> attention, int n_heads, int n_tokens, int n_frames,
                                      int content_len) {
  if (attention.size() != static_cast<size_t>(n_heads) * n_tokens * n_frames) {
    throw Error(ErrorCode::kInternal, "alignment attention has " + std::to_string(attention.size()) +
                                          " values, expected heads*tokens*frames");
  }
  std::vector<int> frames(n_tokens, 0);
  if (n_heads == 0 || n_tokens == 0 || n_frames == 0) return frames;
  // Column statistics per head over all tokens.
  std::vector<double> mean(static_cast<size_t>(n_heads) * n_frames, 0.0), stdev(mean.size(), 0.0);
  for (int h = 0; h < n_heads; ++h) {
    for (int f = 0; f < n_frames; ++f) {
      double sum = 0, sum_squares = 0;
      for (int t = 0; t < n_tokens; ++t) {
        const double v = attention[(static_cast<size_t>(h) * n_tokens + t) * n_frames + f];
        sum += v;
        sum_squares += v * v;
      }
      const double m = sum / n_tokens;
      mean[h * n_frames + f] = m;
      stdev[h * n_frames + f] = std::sqrt(std::max(0.0, sum_squares / n_tokens - m * m));
    }
  }
  std::vector<std::vector<float>> z(n_heads, std::vector<float>(n_frames));
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      const float* row = attention.data() + (static_cast<size_t>(h) * n_tokens + t) * n_frames;
      for (int f = 0; f < n_frames; ++f) {
        z[h][f] = static_cast<float>((row[f] - mean[h * n_frames + f]) / (stdev[h * n_frames + f] + kStdEpsilon));
      }
    }
    frames[t] = argmax_of_heads(z, n_frames, content_len);
  }
  return frames;
}

}  // namespace earshot::policy

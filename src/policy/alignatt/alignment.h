// Alignment-head attention as AlignAtt reads it: the cross-attention rows of the
// alignment heads from the recent decoder calls, each head z-normalised over the
// token axis, median-filtered (width 7) over frames, averaged over heads and
// cropped to the frames that hold audio; the argmax of a row is the frame that
// token attends to.
#pragma once

#include <deque>
#include <span>
#include <vector>

#include "model/asr_decoder.h"

namespace earshot::policy {

inline constexpr int kMedianFilterWidth = 7;

// Keeps, per sequence, running column statistics of the last `window` decoder
// calls (the seed keeps 16) and the newest row, which is all the z-normalisation
// of the newest row needs.
class AlignmentAccumulator {
 public:
  explicit AlignmentAccumulator(int window = 16) : window_(window) {}
  void reset();
  // Adds the attention of one decode call (all sequences).
  void add(const DecodeResult& result);
  // Sequence i continues from sequence source[i].
  void reorder(std::span<const int> source);
  // The frame the newest row of `sequence` attends to most, among [0, content_len).
  int most_attended_frame(int sequence, int content_len) const;
  bool empty() const { return blocks_.empty(); }

 private:
  struct Block {
    int rows = 0;
    std::vector<double> sum, sum_squares;  // [sequence][head][frame]
  };
  int window_;
  int n_sequences_ = 0, n_heads_ = 0, n_frames_ = 0;
  std::deque<Block> blocks_;
  std::vector<float> last_row_;  // [sequence][head][frame]
  // Sums over the blocks in the window, kept as blocks come and go.
  std::vector<double> total_sum_, total_sum_squares_;
  int total_rows_ = 0;
};

// Offline form over a whole decode: attention [head][token][frame] of one
// sequence; returns each token's most attended frame in [0, content_len).
std::vector<int> most_attended_frames(std::span<const float> attention, int n_heads, int n_tokens, int n_frames,
                                      int content_len);

// The median filter the alignment applies, at one frame: the median of the
// kMedianFilterWidth frames around `frame`, edges replicated.
float median_filtered_at(std::span<const float> row, int frame);

}  // namespace earshot::policy

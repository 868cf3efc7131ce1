// What the diarization stage needs of a diarization model: a per-stream source
// of speaker-activity frames (NVIDIA's streaming Sortformer gives one every
// 80 ms for up to 4 speakers, numbered in order of arrival). The source takes
// the stream's 16 kHz samples as they come and hands back the frames it has
// completed; it may hold audio back until it has a chunk's worth.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace earshot::stages::diarization {

constexpr int kMaxSpeakers = 4;

// Speaker activity over [start, end), in seconds on the source's clock (0 = its
// first sample pushed): the probability that each speaker talks in it.
struct ActivityFrame {
  double start = 0;
  double end = 0;
  std::array<float, kMaxSpeakers> prob{};
};

// One stream's source; one thread at a time.
class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  // More of the stream's audio (16 kHz mono), right after what came before.
  virtual void push(std::span<const float> samples) = 0;
  // The audio has ended: the frames of what is left become available.
  virtual void finish() = 0;
  // The frames completed since the last call, in time order.
  virtual std::vector<ActivityFrame> take_frames() = 0;
};

// Opens one stream's source over the loaded model (shared, immutable).
using SourceFactory = std::function<std::unique_ptr<ActivitySource>()>;

}  // namespace earshot::stages::diarization

// Streaming diarization with the arrival-order speaker cache: push 16 kHz audio
// (or NeMo log-mel frames), take per-80-ms-frame speaker probabilities. Each chunk
// of `chunk_frames` output frames is pre-encoded with its left (and right)
// context, appended to [speaker cache, FIFO] and the whole run through the
// encoder, Transformer and head (NeMo's forward_streaming_step, synchronous
// update); the cache keeps speaker identities (channel k = the k-th speaker to
// arrive) over an unbounded stream. The model is shared and immutable; all
// state is here, one Stream per audio stream (not thread-safe itself).
//
//   sortformer::Stream stream(*model, {.max_speakers = 2});
//   stream.push(samples);                     // any sizes
//   for (const auto& f : stream.take_frames()) ...   // f.start, f.end, f.prob[k]
//   stream.finish();                          // the tail, with the right context cut
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/sortformer/aosc.h"
#include "model/sortformer/model.h"

namespace earshot::sortformer {

struct FrameActivity {
  double start = 0;  // seconds on the stream's audio clock (the first sample pushed is 0)
  double end = 0;
  std::array<float, 4> prob{};  // per speaker in order of arrival; channels >= max_speakers are 0
};

struct StreamOptions {
  int max_speakers = 4;  // 1 .. the model's speakers: the channels reported (the model computes all)
  // WhisperLiveKit's settings for its Sortformer backend (frames of 80 ms).
  int chunk_frames = 10;
  int left_context = 10;
  int right_context = 0;
  int spkcache_len = 188;
  int fifo_len = 188;
  int update_period = 144;
  int async_update = -1;  // 1: streaming_update_async, 0: streaming_update; -1: the model's (cache.async_streaming)
  RunOptions run;
};

// What a chunk did, for tests and tools (Stream::set_chunk_observer).
struct ChunkInfo {
  int index = 0;
  int first_frame = 0;               // the stream's output frame of the chunk's first row
  int n_frames = 0;                  // output frames the chunk gave
  std::span<const float> preds;      // [n_frames][n_speakers], before max_speakers
  const AoscState* state = nullptr;  // after the chunk's update
};

// What Stream's constructor throws for an option it refuses: kInvalidArgument,
// with the StreamOptions field ("max_speakers", "chunk_frames"...) so that a
// caller can restate it as its own option (the diarization stage's loader says
// "--max-speakers 3: FILE tells at most 2 speakers apart").
class OptionError : public Error {
 public:
  OptionError(std::string field, const std::string& message)
      : Error(ErrorCode::kInvalidArgument, message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

class Stream {
 public:
  // Throws OptionError for options NeMo would refuse (naming the option and the
  // bound: spkcache_len >= (1 + sil frames per speaker) x speakers, chunk_frames
  // and update_period >= 1, contexts and fifo_len >= 0, max_speakers 1..the
  // model's speakers). The one check of max_speakers against the model.
  Stream(const Model& model, StreamOptions options = {});
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // 16 kHz mono samples, any count. Runs every chunk whose audio (and right context) has arrived.
  void push(std::span<const float> samples16k);
  // Or NeMo log-mel frames ([n_frames][n_mels]); a stream takes one kind of input.
  void push_features(std::span<const float> mel, int n_frames);
  // The end of the stream: the remaining chunks, the last with what right context there is.
  void finish();
  // Frames computed since the last call, in order.
  std::vector<FrameActivity> take_frames();

  const AoscState& state() const { return state_; }
  int chunks() const { return chunks_; }
  // Called after every chunk's update (on the pushing thread).
  void set_chunk_observer(std::function<void(const ChunkInfo&)> observer) { observer_ = std::move(observer); }

 private:
  struct Impl;
  void run_ready(bool final);

  const Model& model_;
  StreamOptions options_;
  AoscConfig config_;
  AoscState state_;
  std::unique_ptr<Impl> impl_;
  std::vector<float> mel_;  // frames [mel_base_, n_mel_) of the stream
  long long mel_base_ = 0, n_mel_ = 0, next_start_ = 0;
  int chunks_ = 0, next_frame_ = 0;
  bool finished_ = false, samples_ = false, features_ = false;
  std::vector<FrameActivity> frames_;
  std::function<void(const ChunkInfo&)> observer_;
};

}  // namespace earshot::sortformer

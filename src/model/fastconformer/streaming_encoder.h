// The cache-aware streaming FastConformer encoder (NVIDIA Nemotron streaming):
// mel frames go in as they arrive, and each chunk of right + 1 encoder frames is
// encoded as soon as the mel it depends on is there, with per-layer caches of the
// last attention inputs (left context) and depthwise conv inputs (kernel - 1).
// The subsampling re-reads 16 mel frames before each chunk (its causal convs'
// receptive field) instead of caching each stage. Chunks ready at once share one
// pass (masked as offline: the weights are read once). The output equals the offline
// Encoder's chunked_limited output frame for frame, whatever the split of the mel.
//
//   StreamingEncoder enc(model, backend, {.right_context = 6});
//   EncoderOutput chunk = enc.push(mel, n);   // 0 or more whole chunks
//   EncoderOutput rest = enc.finish();        // the last, possibly partial chunk
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <memory>
#include <span>
#include <vector>

#include "model/fastconformer/encoder.h"
#include "model/runtime/graph_allocator.h"

namespace earshot::fastconformer {

class StreamingEncoder {
 public:
  // Throws Error(kUnsupported) for a model that cannot stream (check_streaming),
  // kInvalidArgument for a right context the file does not support.
  StreamingEncoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options = {});
  ~StreamingEncoder();
  StreamingEncoder(const StreamingEncoder&) = delete;
  StreamingEncoder& operator=(const StreamingEncoder&) = delete;

  // mel: [n_frames][n_mels], the stream's next frames. Returns the encoder frames
  // of every chunk now complete (first_frame: the stream's frame number).
  EncoderOutput push(std::span<const float> mel, int n_mel_frames);
  // The end of the stream: encodes what is left (the subsampling's right padding
  // as offline). The encoder then starts a new stream.
  EncoderOutput finish();
  // Drops the caches and buffered mel: a new stream.
  void reset();

  int right_context() const { return right_; }
  int chunk_frames() const { return right_ + 1; }
  // Encoder frames output so far in this stream.
  int frames_done() const { return frames_done_; }

 private:
  // Encodes encoder frames [t0, t1] (whole chunks from t0; at the end, the last
  // may be partial) from the buffered mel, in one pass.
  void encode_chunk(int t0, int t1, bool at_end, EncoderOutput& out);

  std::shared_ptr<const Model> model_;
  ggml_backend_t backend_;
  EncoderOptions options_;
  int right_ = 0;
  int cache_frames_ = 0;  // left context kept: left / (right + 1) whole chunks
  std::unique_ptr<runtime::GraphAllocator> alloc_;
  std::vector<uint8_t> meta_;
  std::vector<float> mel_;  // buffered mel frames from mel_base_
  int mel_base_ = 0, n_mel_ = 0;
  int frames_done_ = 0;                                     // encoder frames output
  std::vector<std::vector<float>> att_cache_, conv_cache_;  // per layer: [n][d], [d][kernel - 1]
  std::vector<int> att_cache_frames_;
};

}  // namespace earshot::fastconformer

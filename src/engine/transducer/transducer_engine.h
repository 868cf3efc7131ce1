// The transducer family behind the engine boundary: FastConformer-TDT/RNN-T
// models (whisper.cpp's Parakeet .bin, earshot's GGUF). A transducer's pieces
// come out with their own frame times. An offline model (Parakeet-TDT) has two
// policies: rolling (the default) re-decodes the growing segment every couple
// of seconds of new audio, up to TransducerOptions::window_seconds, and the
// stable/unstable commit layer (policy/commit) commits what passes agree on, so
// words show while the audio arrives, with their frame times; native decodes
// each window once when it is full (utterance-normalised features per window,
// the decoder state carried across), committing each word as the next starts:
// fewer passes, words a window at a time. A cache-aware streaming model
// (Nemotron streaming; policy native only) encodes chunks of (right context + 1)
// x 80 ms as their audio arrives (--lookahead-ms picks the right context among
// the file's): its words are append-only and come a chunk after their audio.
// With RuntimeOptions::batch_streams, the streams' chunks that are ready at
// the same moment run as one graph (fastconformer::StreamingBatcher), each
// stream's words as alone. The engine only wires: the model's streams
// (model/fastconformer/transducer_streams.h) to the policies over the
// model-neutral transducer interface (policy/transducer/, policy/commit/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "engine/transducer/options.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/streaming_batch.h"

namespace earshot::engine {

// The largest --batch-decode for a streaming model.
inline constexpr int kMaxBatchStreams = 64;

class TransducerEngine : public Engine {
 public:
  TransducerEngine(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec);

  const Capabilities& capabilities() const override { return capabilities_; }
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override;
  std::optional<BatchCounts> batch_counts() const override;

 private:
  std::shared_ptr<const fastconformer::Model> model_;
  ModelSpec spec_;
  Capabilities capabilities_;
  int right_context_ = -1;  // a streaming model's chunk - 1 (frames); -1: an offline model
  std::shared_ptr<fastconformer::StreamingBatcher> batcher_;  // --batch-decode with a streaming model
};

// Loads spec.path as a FastConformer transducer (engine/transducer/registration.cpp registers this).
std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec);

}  // namespace earshot::engine

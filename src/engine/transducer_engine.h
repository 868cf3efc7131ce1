// The transducer family behind the engine boundary: FastConformer-TDT/RNN-T
// models (whisper.cpp's Parakeet .bin, earshot's GGUF). A transducer's pieces
// come out append-only with their own frame times, so no commit policy runs
// over it: its one "policy", native, commits each word as soon as the next one
// starts (or the window ends). This offline model encodes the audio in windows
// (TransducerOptions::window_seconds, utterance-normalised features per window,
// the decoder state carried across), so words arrive a window at a time. A
// cache-aware streaming model (Nemotron streaming) encodes chunks of
// (right context + 1) x 80 ms as their audio arrives (--lookahead-ms picks the
// right context among the file's): words come a chunk after their audio.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "model/fastconformer/model.h"

namespace earshot::engine {

class TransducerEngine : public Engine {
 public:
  TransducerEngine(std::shared_ptr<const fastconformer::Model> model, const ModelSpec& spec);

  const Capabilities& capabilities() const override { return capabilities_; }
  std::unique_ptr<OnlineProcessor> open_stream(const StreamRequest& request) const override;

 private:
  std::shared_ptr<const fastconformer::Model> model_;
  ModelSpec spec_;
  Capabilities capabilities_;
  int right_context_ = -1;  // a streaming model's chunk - 1 (frames); -1: an offline model
};

// Loads spec.path as a FastConformer transducer (engine/families.cpp registers this).
std::shared_ptr<const Engine> load_transducer_engine(const ModelSpec& spec);

}  // namespace earshot::engine

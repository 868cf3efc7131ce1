// The transducer family's own settings (ModelSpec::options<TransducerOptions>()).
#pragma once

#include "features/nemo_mel.h"

namespace earshot::engine {

struct TransducerOptions {
  static constexpr const char* kFamily = "transducer";
  double window_seconds = 20;  // audio an offline transducer encodes at once (1 to 120 s)
  // A cache-aware streaming model's chunk, (right context + 1) x 80 ms: 80, 160,
  // 560, 1120 for Nemotron streaming, validated against the file; 0 = the file's
  // default. A non-streaming model refuses any other value than 0, and so does
  // every other family (Family::foreign_request).
  int lookahead_ms = 0;
  // The features' frames of n samples: NeMo's n/160 (the default) or
  // libparakeet's n/160 + 1 (--nemo-mel-frames libparakeet; docs/models.md).
  features::NemoFrameCount mel_frames = features::NemoFrameCount::kNemo;
  // Beam search width per decoding pass (--transducer-beams; 1 = greedy).
  int beams = 1;
};

}  // namespace earshot::engine

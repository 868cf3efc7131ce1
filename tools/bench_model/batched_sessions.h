// earshot-bench-model --parts sessions: whole decoder steps of B sessions (each
// with its own encoder output and caches) run as one batched graph
// (whisper::BatchExecutor) against the same steps run one session at a time, for
// B = 1, 2, 4, 8, 16, in one run; checks that every batched result equals the
// lone one bit for bit.
#pragma once

#include <memory>

#include "model/whisper/model.h"

namespace earshot::tools {

// Prints one line per batch size: per-step latency (one batched graph vs B lone
// steps), aggregate decoder tokens/s both ways, the speedup and the identity check.
// Each rep decodes `steps` greedy tokens per session after a 3-token prompt, over
// `audio_seconds` of encoded audio (the audio-only encoder input), with the
// alignment heads' attention and the timestamp-free vocabulary, as AlignAtt asks.
void bench_batched_sessions(const std::shared_ptr<const whisper::Model>& model, int threads, int reps, int steps,
                            int audio_seconds);

}  // namespace earshot::tools

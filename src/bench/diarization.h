// `earshot bench --diarization-model`: each ASR stream's committed words and
// its audio replayed through a fresh synchronous diarization stage (the one
// `earshot transcribe` runs for a file), in the order transcribe feeds it:
// per emission, the audio fed before it, then the words it committed and its
// (empty) provisional tail; then the end of the stream. The speakers the stage
// names are scored per clip against the clip's RTTM truth
// (diarization_metrics.h); the stage's time is measured apart from the ASR's.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "bench/diarization_metrics.h"
#include "bench/metrics.h"
#include "bench/runner.h"
#include "stages/stage.h"

namespace earshot::bench {

struct DiarizedStream {
  std::vector<Word> words;     // the stream's committed words, each with the stage's speaker (-1: none)
  double compute_seconds = 0;  // wall inside the stage's calls (`clock`)
};

// `audio` is the stream's audio (16 kHz mono), `trace` its ASR run.
DiarizedStream diarize_trace(const StreamTrace& trace, std::span<const float> audio, stages::Stage& stage,
                             Clock& clock);

// One stream's speaker turns (the segments of its words with a speaker, as
// `earshot transcribe --format rttm` writes them: milliseconds) under the
// truth's file id and channel (else the clip's id and channel 1), scored
// against the truth when there is one.
DiarizedClip score_clip(const Utterance& utterance, const DiarizedStream& stream,
                        const std::optional<SpeakerTruth>& truth);

}  // namespace earshot::bench

// Diarization on the stage registry. Its options, on serve, transcribe and
// bench (which scores the speakers against RTTM truths, bench/diarization.h):
//   --diarization-model PATH|NAME  the model (turns the stage on)
//   --max-speakers N               1..4 (default 4)
//   --diarization-chunk-ms MS      audio per model step: what the speaker fields wait for
//   --diarization-workers N        serve (and bench --capacity): streams whose model work runs at once (default 1)
// A stream is diarized unless its protocol says not (Deepgram's diarize=false,
// its default); the model's loader comes with the registry line, so the stage
// itself names no model.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "stages/diarization/diarization_stage.h"
#include "stages/registry.h"

namespace earshot::stages::diarization {

// What the loader is asked for.
struct ModelRequest {
  std::string model;  // --diarization-model: a file path, or a name the model cache knows
  int threads = 1;    // CPU threads of one stream's model step
  int chunk_ms = 0;   // --diarization-chunk-ms: audio per model step (0: the model's default)
  int max_speakers = kMaxSpeakers;
};

// Loads a diarization model and returns the factory of its per-stream sources.
// Throws Error with a message naming the option and the file.
using ModelLoader = std::function<SourceFactory(const ModelRequest& request)>;

// The registry entry, over the model `load` opens; `catalogue`: the models its
// --diarization-model takes by name (`earshot pull`); `summarize`: what a file of
// that model is (`earshot models`).
StageDefinition stage_definition(ModelLoader load, std::function<std::vector<models::ModelInfo>()> catalogue = {},
                                 decltype(StageDefinition::summarize) summarize = {});

class LoadedDiarization : public LoadedStage {
 public:
  LoadedDiarization(SourceFactory sources, DiarizationOptions options, int workers);
  std::unique_ptr<Stage> open(const StreamRequest& request) const override;
  std::vector<Metric> metrics() const override;

 private:
  SourceFactory sources_;
  DiarizationOptions options_;
  std::shared_ptr<WorkerPool> pool_;
  std::shared_ptr<DiarizationCounters> counters_;
};

}  // namespace earshot::stages::diarization

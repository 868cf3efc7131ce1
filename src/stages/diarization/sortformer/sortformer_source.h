// The diarization stage's model: NVIDIA's streaming Sortformer
// (model/sortformer), one sortformer::Stream per audio stream behind the
// stage's ActivitySource. The registry's diarization line passes
// sortformer_loader(); nothing else in the stage names the model.
//
// Chunking (--diarization-chunk-ms): the model steps over `chunk` frames of 80
// ms with WhisperLiveKit's other settings (left context 10 frames, right 0,
// speaker cache 188, FIFO 188, cache update every 144 frames). Each step runs
// the encoder and Transformer over [speaker cache, FIFO, chunk], ~380 frames
// whatever the chunk, so the compute per audio second falls with the chunk
// length: WhisperLiveKit's 0.8 s chunks cost several CPU seconds per audio
// second at the real model's size, so earshot's default is kDefaultChunkMs
// (docs/diarization.md has the figures); --diarization-chunk-ms 800 is
// WhisperLiveKit's.
#pragma once

#include <memory>
#include <vector>

#include "model/registry.h"
#include "model/sortformer/model.h"
#include "model/sortformer/stream.h"
#include "stages/diarization/registration.h"

namespace earshot::stages::diarization {

inline constexpr int kDefaultChunkMs = 4000;

// The stream settings a request asks for (chunk_ms 0: kDefaultChunkMs; rounded
// to whole 80 ms frames, at least one).
sortformer::StreamOptions sortformer_stream_options(const ModelRequest& request);

// One stream's activity source over a loaded model (shared, immutable).
class SortformerSource : public ActivitySource {
 public:
  SortformerSource(std::shared_ptr<const sortformer::Model> model, const sortformer::StreamOptions& options);
  void push(std::span<const float> samples) override;
  void finish() override;
  std::vector<ActivityFrame> take_frames() override;

 private:
  std::shared_ptr<const sortformer::Model> model_;  // outlives stream_
  sortformer::Stream stream_;
};

// The registry's loader: --diarization-model as a file path or a name `earshot
// pull` knows (transcribe.cpp/diar_streaming_sortformer_4spk-v2.1-f16...), in
// earshot's layout or transcribe.cpp's.
ModelLoader sortformer_loader();
// The Sortformer files `earshot pull` fetches by name (the stage's catalogue).
std::vector<models::ModelInfo> sortformer_catalogue();
// What a Sortformer file is, for `earshot models` (earshot's layout or
// transcribe.cpp's); nullopt for any other file.
std::optional<quantize::FileSummary> sortformer_file_summary(const runtime::ModelFileProbe& file,
                                                             const std::filesystem::path& path);

}  // namespace earshot::stages::diarization

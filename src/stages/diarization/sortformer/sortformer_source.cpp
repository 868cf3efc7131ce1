#include "stages/diarization/sortformer/sortformer_source.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace earshot::stages::diarization {

sortformer::StreamOptions sortformer_stream_options(const ModelRequest& request) {
  sortformer::StreamOptions o;  // WhisperLiveKit's settings but the chunk
  const int chunk_ms = request.chunk_ms > 0 ? request.chunk_ms : kDefaultChunkMs;
  o.chunk_frames = std::max(1, static_cast<int>(std::lround(chunk_ms / 80.0)));
  o.max_speakers = std::clamp(request.max_speakers, 1, kMaxSpeakers);
  o.run.threads = std::max(1, request.threads);
  o.run.cpu_kernels = runtime::CpuKernels::kAuto;
  return o;
}

SortformerSource::SortformerSource(std::shared_ptr<const sortformer::Model> model,
                                   const sortformer::StreamOptions& options)
    : model_(std::move(model)), stream_(*model_, options) {}

void SortformerSource::push(std::span<const float> samples) { stream_.push(samples); }

void SortformerSource::finish() { stream_.finish(); }

std::vector<ActivityFrame> SortformerSource::take_frames() {
  std::vector<ActivityFrame> out;
  for (const sortformer::FrameActivity& f : stream_.take_frames()) {
    ActivityFrame a;
    a.start = f.start;
    a.end = f.end;
    for (int k = 0; k < kMaxSpeakers && k < static_cast<int>(f.prob.size()); ++k) a.prob[k] = f.prob[k];
    out.push_back(a);
  }
  return out;
}

ModelLoader sortformer_loader() {
  return [](const ModelRequest& request) -> SourceFactory {
    std::filesystem::path path;
    try {
      path = models::resolve_diarization_model(request.model, sortformer_catalogue());
    } catch (const Error& e) {
      throw Error(e.code(), std::string("--diarization-model: ") + e.what());
    }
    std::shared_ptr<const sortformer::Model> model;
    try {
      model = sortformer::Model::load(path);
    } catch (const Error& e) {
      throw Error(e.code(), std::string("--diarization-model: ") + e.what());
    }
    const sortformer::StreamOptions options = sortformer_stream_options(request);
    try {
      sortformer::Stream check(*model, options);  // refuses settings the model cannot run, before any stream
    } catch (const sortformer::OptionError& e) {
      // The Stream's check, restated with the option and the file the user gave.
      if (e.field() == "max_speakers")
        throw Error(e.code(), "--max-speakers " + std::to_string(options.max_speakers) + ": " + path.string() +
                                  " tells at most " + std::to_string(model->hparams().n_speakers) + " speakers apart");
      throw Error(e.code(), "--diarization-model " + path.string() + ": " + e.what());
    }
    return [model, options] { return std::make_unique<SortformerSource>(model, options); };
  };
}

}  // namespace earshot::stages::diarization

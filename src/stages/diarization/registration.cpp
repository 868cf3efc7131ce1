#include "stages/diarization/registration.h"

#include <algorithm>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::stages::diarization {

namespace {

struct Settings {
  ModelRequest request;
  DiarizationOptions options;
  int workers = 1;
};

class ReadSettings : public StageSettings {
 public:
  ReadSettings(Settings settings, ModelLoader load) : settings_(std::move(settings)), load_(std::move(load)) {}
  std::shared_ptr<const LoadedStage> load() const override {
    SourceFactory sources = load_(settings_.request);
    if (!sources)
      throw Error(ErrorCode::kInternal, "--diarization-model " + settings_.request.model + ": no stream source");
    return std::make_shared<LoadedDiarization>(std::move(sources), settings_.options, settings_.workers);
  }

 private:
  Settings settings_;
  ModelLoader load_;
};

void declare(Args& args, Command command) {
  args.option("diarization-model",
              command == Command::kBench
                  ? "speaker diarization model (a path or a name `earshot pull` knows): every stream's words get "
                    "speakers, scored against AUDIO.rttm truths (DER), with the stage's compute"
                  : "speaker diarization model (a path or a name `earshot pull` knows): every word gets a speaker "
                    "(Deepgram streams: with diarize=true)",
              "")
      .option("max-speakers", "diarization: most speakers told apart (1..4)", "4")
      .option("diarization-chunk-ms",
              "diarization: audio per model step, which the speaker fields wait for (shorter: sooner, but more "
              "compute per audio second; 0: the model's default)",
              "0");
  if (command == Command::kServe)
    args.option("diarization-workers", "diarization: streams whose model work runs at the same time", "1");
  if (command == Command::kBench)
    args.option("diarization-workers",
                "diarization with --capacity: streams whose model work runs at the same time (serve's option)", "1");
}

std::unique_ptr<StageSettings> configure(const Args& args, const CommandContext& context, const ModelLoader& load) {
  Settings s;
  s.request.model = args.get("diarization-model");
  const long speakers = args.get_int("max-speakers");
  if (speakers < 1 || speakers > kMaxSpeakers)
    throw Error(ErrorCode::kInvalidArgument, "--max-speakers must be 1.." + std::to_string(kMaxSpeakers));
  s.options.rule.max_speakers = static_cast<int>(speakers);
  s.request.max_speakers = s.options.rule.max_speakers;
  const long chunk_ms = args.get_int("diarization-chunk-ms");
  if (chunk_ms < 0 || chunk_ms > 60000)
    throw Error(ErrorCode::kInvalidArgument, "--diarization-chunk-ms must be 0..60000 (0: the model's default)");
  s.request.chunk_ms = static_cast<int>(chunk_ms);
  s.request.threads = std::max(1, context.threads);
  if (context.command == Command::kServe || context.command == Command::kBench) {
    const long workers = args.get_int("diarization-workers");
    if (workers < 1 || workers > 256) throw Error(ErrorCode::kInvalidArgument, "--diarization-workers must be 1..256");
    s.workers = static_cast<int>(workers);
  }
  if (s.request.model.empty()) {
    for (const char* option : {"max-speakers", "diarization-chunk-ms", "diarization-workers"})
      if ((context.command != Command::kTranscribe || std::string_view(option) != "diarization-workers") &&
          args.has(option))
        throw Error(ErrorCode::kInvalidArgument, std::string("--") + option + " needs --diarization-model PATH|NAME");
    return nullptr;
  }
  return std::make_unique<ReadSettings>(std::move(s), load);
}

}  // namespace

StageDefinition stage_definition(ModelLoader load, std::function<std::vector<models::ModelInfo>()> catalogue,
                                 decltype(StageDefinition::summarize) summarize) {
  return {"diarization", declare,
          [load](const Args& args, const CommandContext& context) { return configure(args, context, load); },
          std::move(catalogue), std::move(summarize)};
}

LoadedDiarization::LoadedDiarization(SourceFactory sources, DiarizationOptions options, int workers)
    : sources_(std::move(sources)),
      options_(options),
      pool_(std::make_shared<WorkerPool>(workers)),
      counters_(std::make_shared<DiarizationCounters>()) {}

std::unique_ptr<Stage> LoadedDiarization::open(const StreamRequest& request) const {
  // Deepgram's diarize; a protocol without such a parameter is diarized.
  if (const auto asked = request.params.find("diarize"); asked != request.params.end() && asked->second != "true")
    return nullptr;
  return std::make_unique<DiarizationStage>(sources_(), options_, request.live ? pool_ : nullptr, counters_);
}

std::vector<Metric> LoadedDiarization::metrics() const {
  const auto seconds = [](int64_t samples) { return static_cast<double>(samples) / kSampleRate; };
  const DiarizationCounters& c = *counters_;
  return {
      {"earshot_diarization_queued_seconds", "gauge",
       "Audio waiting for the diarization model now, all streams (it is behind when this grows).",
       seconds(c.queued_samples.load())},
      {"earshot_diarization_dropped_seconds_total", "counter",
       "Audio the diarization skipped because a stream's model work fell behind (its words: nearest speaker or none).",
       seconds(c.dropped_samples.load())},
      {"earshot_diarization_audio_seconds_total", "counter", "Audio run through the diarization model.",
       seconds(c.processed_samples.load())},
      {"earshot_diarization_compute_seconds_total", "counter", "Wall seconds of diarization model work.",
       static_cast<double>(c.compute_microseconds.load()) / 1e6},
      {"earshot_diarization_words_total", "counter", "Committed words given a speaker (or found without one).",
       static_cast<double>(c.words.load())},
      {"earshot_diarization_unknown_words_total", "counter", "Committed words no speaker activity was near.",
       static_cast<double>(c.unknown_words.load())},
  };
}

}  // namespace earshot::stages::diarization

#include "stages/diarization/registration.h"

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::stages::diarization {

namespace {

struct Settings {
  std::string model;
  DiarizationOptions options;
  int workers = 1;
};

class ReadSettings : public StageSettings {
 public:
  ReadSettings(Settings settings, ModelLoader load) : settings_(std::move(settings)), load_(std::move(load)) {}
  std::shared_ptr<const LoadedStage> load() const override {
    SourceFactory sources = load_(settings_.model, 0);
    if (!sources) throw Error(ErrorCode::kInternal, "--diarization-model " + settings_.model + ": no stream source");
    return std::make_shared<LoadedDiarization>(std::move(sources), settings_.options, settings_.workers);
  }

 private:
  Settings settings_;
  ModelLoader load_;
};

void declare(Args& args, Command command) {
  if (command == Command::kBench) return;  // no speaker figures in bench yet
  args.option("diarization-model",
              "speaker diarization model (a path or a name `earshot pull` knows): every word gets a speaker "
              "(Deepgram streams: with diarize=true)",
              "")
      .option("max-speakers", "diarization: most speakers told apart (1..4)", "4");
  if (command == Command::kServe)
    args.option("diarization-workers", "diarization: streams whose model work runs at the same time", "1");
}

std::unique_ptr<StageSettings> configure(const Args& args, const CommandContext& context, const ModelLoader& load) {
  if (context.command == Command::kBench) return nullptr;
  Settings s;
  s.model = args.get("diarization-model");
  const long speakers = args.get_int("max-speakers");
  if (speakers < 1 || speakers > kMaxSpeakers)
    throw Error(ErrorCode::kInvalidArgument, "--max-speakers must be 1.." + std::to_string(kMaxSpeakers));
  s.options.rule.max_speakers = static_cast<int>(speakers);
  if (context.command == Command::kServe) {
    const long workers = args.get_int("diarization-workers");
    if (workers < 1 || workers > 256) throw Error(ErrorCode::kInvalidArgument, "--diarization-workers must be 1..256");
    s.workers = static_cast<int>(workers);
  }
  if (s.model.empty()) {
    if (args.has("max-speakers") || args.has("diarization-workers"))
      throw Error(ErrorCode::kInvalidArgument, std::string("--") +
                                                   (args.has("max-speakers") ? "max-speakers" : "diarization-workers") +
                                                   " needs --diarization-model PATH|NAME");
    return nullptr;
  }
  return std::make_unique<ReadSettings>(std::move(s), load);
}

}  // namespace

StageDefinition stage_definition(ModelLoader load) {
  return {"diarization", declare,
          [load](const Args& args, const CommandContext& context) { return configure(args, context, load); }};
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

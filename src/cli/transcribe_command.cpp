// `earshot transcribe FILE...`: streams files through a policy as a live stream
// would arrive, shows committed words live, writes events and a final transcript.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/policy_options.h"
#include "cli/transcribe.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/families.h"
#include "engine/model_options.h"
#include "stages/registry.h"
#ifdef EARSHOT_HAVE_MODEL_REGISTRY
#include "model/registry.h"
#endif

namespace earshot::cli {

namespace {

std::filesystem::path model_path(const std::string& name_or_path) {
#ifdef EARSHOT_HAVE_MODEL_REGISTRY
  return models::resolve_model(name_or_path);
#else
  if (!std::filesystem::exists(name_or_path)) {
    throw Error(ErrorCode::kIo, "model file '" + name_or_path + "' does not exist");
  }
  return name_or_path;
#endif
}

// One status line on a terminal: progress, the committed tail, the provisional tail in grey.
class LiveLine {
 public:
  explicit LiveLine(bool enabled) : enabled_(enabled) {}
  void update(const Emission& e, double total_seconds) {
    if (!enabled_) return;
    committed_ += words_text(e.committed).empty() ? "" : (committed_.empty() ? "" : " ") + words_text(e.committed);
    const std::string provisional = words_text(e.provisional);
    std::string shown = committed_.size() > 60 ? "…" + committed_.substr(committed_.size() - 60) : committed_;
    std::fprintf(stderr, "\r\033[K");
    if (total_seconds > 60) std::fprintf(stderr, "[%3.0f%%] ", 100.0 * e.audio_time / total_seconds);
    std::fprintf(stderr, "%s \033[2m%s\033[0m", shown.c_str(), provisional.c_str());
    std::fflush(stderr);
  }
  void done() {
    if (enabled_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  std::string committed_;
};

}  // namespace

int run_transcribe(const CommandArgs& argv) {
  Args args("transcribe", "earshot transcribe FILE... [options]");
  args.option("model", "model file (or a name known to `earshot pull`)", "")
      .option("language", "language code, or auto to detect", "auto")
      .option("policy", "streaming policy: " + engine::policy_choices() + " (what the model offers; default its first)",
              "")
      .option("chunk", "seconds of audio fed per step", "0.5")
      .flag("realtime", "feed audio no faster than real time")
      .option("format",
              "final transcript format: txt, json, srt, vtt or rttm (speaker turns, with --diarization-model)", "txt")
      .option("events", "write one JSON line per emission to this file", "")
      .option("trace",
              "alignatt: write one JSON line per policy pass to this file (docs/architecture.md: per-pass trace)", "")
      .option("beams", "beam search width (1 = greedy; alignatt only)", "1")
      .option("threads", "CPU threads for the model", default_thread_count())
      .flag("never-fire", "alignatt: hold the last word of each pass until the next pass")
      .option("output", "write the transcript here instead of stdout", "");
  declare_alignatt_options(args);
  engine::declare_model_options(args, CommandKind::kTranscribe);
  stages::StageChain::declare(args, stages::Command::kTranscribe);
  if (!args.parse_or_help(argv, {.required = {"model"}, .positional = true})) return 0;
  if (args.positional().empty()) throw Error(ErrorCode::kInvalidArgument, "no input file (see --help)");
  TranscribeOptions options;
  options.chunk_seconds = args.get_double("chunk");
  options.realtime = args.get_flag("realtime");
  engine::ModelSpec spec = engine::read_model_spec(args, CommandKind::kTranscribe);
  policy::AlignAttConfig alignatt;
  alignatt.beams = static_cast<int>(args.get_int("beams"));
  alignatt.never_fire = args.get_flag("never-fire");
  std::ofstream trace;
  if (args.has("trace")) {
    trace.open(args.get("trace"));
    if (!trace) throw Error(ErrorCode::kIo, "cannot write --trace file '" + args.get("trace") + "'");
    // Every file's stream writes here in turn; each starts again at pass 0.
    alignatt.on_trace = [&trace](const std::string& line) { trace << line << "\n"; };
  }
  spec.policies.alignatt = read_alignatt_options(args, std::move(alignatt));
  engine::StreamRequest request;
  request.policy = args.get("policy");
  request.language = args.get("language");
  const std::string format = args.get("format");
  format_transcript({}, format, "");  // reject a bad --format before any work
  // The CLI has no VAD pauses: segments close at punctuation and the maxima.
  const stages::StageChain chain =
      stages::StageChain::load(args, {.command = stages::Command::kTranscribe,
                                      .pause_seconds = 5.0,
                                      .threads = static_cast<int>(args.get_int("threads"))});
  // The translation's text and finals are part of every format when it runs.
  const bool translating = chain.find("translation") != nullptr;

  spec.path = model_path(args.get("model"));
  const std::shared_ptr<const engine::Engine> engine = engine::load(spec);
  request.policy = engine->resolve_policy(request.policy);
  check_beams_policy(spec.policies.alignatt.beams, request.policy);
  if (request.policy != "alignatt" && trace.is_open()) {
    throw Error(ErrorCode::kInvalidArgument, "--trace applies to --policy alignatt only");
  }
  std::ofstream events;
  if (args.has("events")) {
    events.open(args.get("events"));
    if (!events) throw Error(ErrorCode::kIo, "cannot write --events file '" + args.get("events") + "'");
  }
  std::string output;
  for (const std::string& file : args.positional()) {
    const std::vector<float> pcm = audio::load_file(file);
    const double total = static_cast<double>(pcm.size()) / kSampleRate;
    const bool on_terminal = isatty(fileno(stderr)) != 0;
    // A warning on a terminal clears the live line first; the next emission redraws it.
    request.on_warning = [on_terminal](const std::string& message) {
      std::fprintf(stderr, "%searshot: %s\n", on_terminal ? "\r\033[K" : "", message.c_str());
    };
    auto processor = engine->open_stream(request);
    LiveLine live(on_terminal);
    // A file: the stages work in order, every draft (no real-time budget to keep).
    const std::vector<std::unique_ptr<stages::Stage>> owned = chain.open({request.language, {}, false});
    std::vector<stages::Stage*> stages;
    for (const auto& stage : owned) stages.push_back(stage.get());
    const Transcript t = transcribe(
        *processor, pcm, options,
        [&](const Emission& e) {
          live.update(e, total);
          if (events.is_open()) events << emission_json(e) << "\n";
        },
        stages, translating);
    live.done();
    output += format_transcript(t, format, file);
  }
  if (trace.is_open() && !trace.flush()) {
    throw Error(ErrorCode::kIo, "cannot write --trace file '" + args.get("trace") + "'");
  }
  if (args.has("output")) {
    std::ofstream out(args.get("output"));
    if (!(out << output)) throw Error(ErrorCode::kIo, "cannot write --output file '" + args.get("output") + "'");
  } else {
    std::fputs(output.c_str(), stdout);
  }
  return 0;
}

}  // namespace earshot::cli

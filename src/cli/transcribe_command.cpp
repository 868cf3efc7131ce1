// `earshot transcribe FILE...`: streams files through a policy as a live stream
// would arrive, shows committed words live, writes events and a final transcript.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/keyterm_options.h"
#include "cli/transcribe.h"
#include "cli/transcribe_settings.h"
#include "common/command_line.h"
#include "common/error.h"
#include "engine/catalogue.h"
#include "engine/families.h"
#include "policy/alignatt/alignatt_options.h"
#include "stages/registry.h"

namespace earshot::cli {

namespace {

std::filesystem::path model_path(const std::string& name_or_path) { return engine::resolve_model(name_or_path); }

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

// The run with validated settings: files opened, stages and model loaded, each
// audio file streamed in turn, the transcript written. `args` carries the stages'
// options, read when the chain loads.
int transcribe_files(TranscribeSettings s, const Args& args) {
  std::ofstream trace;
  if (s.trace) {
    trace.open(*s.trace);
    if (!trace) throw Error(ErrorCode::kIo, "cannot write --trace file '" + *s.trace + "'");
    // Every file's stream writes here in turn; each starts again at pass 0.
    s.model.policies.alignatt.on_trace = [&trace](const std::string& line) { trace << line << "\n"; };
  }
  // The CLI has no VAD pauses: segments close at punctuation and the maxima.
  const stages::StageChain chain = stages::StageChain::load(
      args, {.command = stages::Command::kTranscribe, .pause_seconds = 5.0, .threads = s.model.runtime.threads});
  // The translation's text and finals are part of every format when it runs.
  const bool translating = chain.find("translation") != nullptr;

  s.model.path = model_path(s.model_name);
  const std::shared_ptr<const engine::Engine> engine = engine::load(s.model);
  engine::StreamRequest request;
  request.policy = engine->resolve_policy(s.policy);
  request.language = s.language;
  request.keyterms = s.keyterms;
  policy::check_beams_policy(s.model.policies.alignatt.beams, request.policy);
  if (request.policy != "alignatt" && trace.is_open()) {
    throw Error(ErrorCode::kInvalidArgument, "--trace applies to --policy alignatt only");
  }
  std::ofstream events;
  if (s.events) {
    events.open(*s.events);
    if (!events) throw Error(ErrorCode::kIo, "cannot write --events file '" + *s.events + "'");
  }
  std::string output;
  for (const std::string& file : s.files) {
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
        *processor, pcm, s.feed,
        [&](const Emission& e) {
          live.update(e, total);
          if (events.is_open()) events << emission_json(e) << "\n";
        },
        stages, translating);
    live.done();
    output += format_transcript(t, s.format, file);
  }
  if (trace.is_open() && !trace.flush()) {
    throw Error(ErrorCode::kIo, "cannot write --trace file '" + *s.trace + "'");
  }
  if (s.output) {
    std::ofstream out(*s.output);
    if (!(out << output)) throw Error(ErrorCode::kIo, "cannot write --output file '" + *s.output + "'");
  } else {
    std::fputs(output.c_str(), stdout);
  }
  return 0;
}

}  // namespace

int run_transcribe(const CommandArgs& argv) {
  Args args("transcribe", TranscribeSettings::kUsage);
  TranscribeSettings::declare(args);
  std::optional<TranscribeSettings> settings = TranscribeSettings::parse(args, argv);
  if (!settings) return 0;
  return transcribe_files(std::move(*settings), args);
}

}  // namespace earshot::cli

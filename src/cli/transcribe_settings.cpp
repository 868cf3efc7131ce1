#include "cli/transcribe_settings.h"

#include "cli/keyterm_options.h"
#include "common/error.h"
#include "engine/model_options.h"
#include "stages/registry.h"

namespace earshot::cli {
namespace {

std::optional<std::string> given(const Args& args, const std::string& name) {
  return args.has(name) ? std::optional<std::string>(args.get(name)) : std::nullopt;
}

}  // namespace

void TranscribeSettings::declare(Args& args) {
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
      .option("threads", "CPU threads for the model", default_thread_count())
      .option("output", "write the transcript here instead of stdout", "");
  declare_keyterm_options(args);
  engine::declare_model_options(args, CommandKind::kTranscribe);
  stages::StageChain::declare(args, stages::Command::kTranscribe);
}

std::optional<TranscribeSettings> TranscribeSettings::parse(Args& args, const CommandArgs& argv) {
  if (!args.parse_or_help(argv, {.required = {"model"}, .positional = true})) return std::nullopt;
  return read(args);
}

TranscribeSettings TranscribeSettings::read(const Args& args) {
  if (args.positional().empty()) throw Error(ErrorCode::kInvalidArgument, "no input file (see --help)");
  TranscribeSettings s;
  s.files = args.positional();
  s.model_name = args.get("model");
  s.feed.chunk_seconds = args.get_double("chunk");
  s.feed.realtime = args.get_flag("realtime");
  s.model = engine::read_model_spec(args, CommandKind::kTranscribe);
  s.keyterms = read_keyterms(args, s.model.policies.alignatt);
  s.model.policies.keyterm_bonus = read_keyterm_bonus(args);
  s.policy = args.get("policy");
  s.language = args.get("language");
  s.format = args.get("format");
  format_transcript({}, s.format, "");  // reject a bad --format before any work
  s.events = given(args, "events");
  s.trace = given(args, "trace");
  s.output = given(args, "output");
  return s;
}

}  // namespace earshot::cli

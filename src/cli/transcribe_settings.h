// `earshot transcribe`'s command line as settings: its options declared on Args,
// then read and checked into typed fields before any file is opened or loaded
// (the trace and events files, the stages, the model, the audio), so a bad value
// is refused first, naming the flag the user typed. The model families' options
// come from the family registry (engine::read_model_spec); the stages' are
// declared here and read when transcribe loads them (stages::StageChain::load).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/transcribe.h"
#include "common/command_line.h"
#include "common/keyterms.h"
#include "engine/model_spec.h"

namespace earshot::cli {

struct TranscribeSettings {
  static constexpr const char* kUsage = "earshot transcribe FILE... [options]";

  // Every option of `earshot transcribe`: its own, AlignAtt's, the model families' and the stages'.
  static void declare(Args& args);
  // args (declared) parsed from argv with transcribe's rules (--model required,
  // files positional), then read(); nullopt when --help was asked for (and printed).
  static std::optional<TranscribeSettings> parse(Args& args, const CommandArgs& argv);
  // The parsed options read and validated. Throws earshot::Error(kInvalidArgument)
  // naming the option; opens and loads nothing.
  static TranscribeSettings read(const Args& args);

  std::vector<std::string> files;  // the audio files, in order
  std::string model_name;          // --model: a name known to `earshot pull` or a path
  // Runtime, each family's options, beams and the other AlignAtt settings; no path,
  // no trace callback (bound to --trace's file when the run opens it).
  engine::ModelSpec model;
  std::string policy;                                // --policy; "" = the model's first
  std::string language;                              // --language: a code, or auto
  Keyterms keyterms;                                 // --keyterms, --static-init-prompt
  TranscribeOptions feed;                            // --chunk, --realtime
  std::string format;                                // txt, json, srt, vtt or rttm
  std::optional<std::string> events, trace, output;  // --events, --trace, --output files
};

}  // namespace earshot::cli

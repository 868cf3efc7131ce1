// `earshot replay-translation`: a recorded translation-stage input stream
// (serve/transcribe --translation-record) through a fresh engine, to A/B the
// commit modes: draft coverage, commit delays, final lags, model calls.
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "common/command_line.h"
#include "common/error.h"
#include "stages/translation/options.h"

namespace earshot::cli {

namespace tr = stages::translation;

int run_replay_translation(const CommandArgs& argv) {
  Args args("replay-translation", "earshot replay-translation RECORDING.jsonl --translation-model PATH [options]");
  args.option("source-language", "the recording's source language (a code; auto = from its words)", "auto")
      .option("output", "write the replayed translation events (JSONL) here", "");
  tr::declare_translation_options(args, "target-language");
  if (!args.parse_or_help(argv, {.required = {"target-language"}, .positional = true})) return 0;
  if (args.positional().size() != 1) throw Error(ErrorCode::kInvalidArgument, "give one recording (see --help)");
  const std::vector<tr::RecordedEvent> input = tr::read_recording(args.positional()[0]);
  std::optional<tr::TranslationSetup> setup = tr::read_translation_options(args, "target-language", 5.0);
  if (!setup) throw Error(ErrorCode::kInvalidArgument, "--translation-model is required");
  tr::CalibrationRegistry registry = tr::CalibrationRegistry::builtin();
  if (!args.get("translation-calibration").empty()) registry.load_file(args.get("translation-calibration"));
  const tr::ReplayResult result =
      tr::replay(std::shared_ptr<const llm::LlmModel>(setup->service, &setup->service->model()), registry, input,
                 args.get("source-language"), setup->service->defaults());
  if (!args.get("output").empty()) {
    std::ofstream out(args.get("output"));
    for (const tr::RecordedEvent& e : result.output) out << tr::to_json_line(e) << "\n";
    if (!out) throw Error(ErrorCode::kIo, "cannot write --output file '" + args.get("output") + "'");
  }
  std::printf("%s\n", tr::replay_report_json(result).c_str());
  return 0;
}

}  // namespace earshot::cli

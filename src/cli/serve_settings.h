// `earshot serve`'s command line as settings: its options declared on Args, then
// read and checked into the server's configuration and the model's spec before
// anything is loaded or downloaded (the stages, the VAD, the model), so a bad
// value or combination is refused first, naming the flag the user typed. The
// model families' options come from the family registry (engine::read_model_spec);
// the stages' are declared here and read when serve loads them
// (stages::StageChain::load).
#pragma once

#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/worker_plan.h"
#include "common/command_line.h"
#include "engine/model_spec.h"
#include "server/config.h"

namespace earshot::cli {

struct ServeSettings {
  static constexpr const char* kUsage = "earshot serve [options]";

  // Every option of `earshot serve`: its own, AlignAtt's, the model families' and the stages'.
  static void declare(Args& args);
  // args (declared) parsed from argv, then read(); nullopt when --help was asked for (and printed).
  static std::optional<ServeSettings> parse(Args& args, const CommandArgs& argv);
  // The parsed options read and validated. Throws earshot::Error naming the option
  // (kInvalidArgument; kUnsupported for a webm/opus stream without FFmpeg); loads nothing.
  static ServeSettings read(const Args& args);

  // Everything but the stages (known once they load) and the model's id (once it loads).
  server::ServerConfig config;
  engine::ModelSpec model;  // runtime, each family's options, the policies' settings; no path
  std::string model_name;   // --model: a name (pulled into the cache when absent) or a path
  std::string policy;       // --policy; "" = the model's first
  bool pull = true;         // not --no-pull
  bool vac = true;          // not --no-vac
  std::string vad_model;    // --vad-model; "" = the model cache's (pulled when absent)
  std::string trace_dir;    // --trace-dir; "" = no traces
  std::optional<std::string> warmup_file;
  WorkerRequest workers;  // --workers, --threads, --lend-cores: planned once the model's family is known
};

}  // namespace earshot::cli

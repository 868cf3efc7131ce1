// `earshot serve` up to the moment the server starts: options parsed and checked
// (ServeSettings), stages, model (through engine::load) and VAD loaded, a stream
// warmed up. run_serve() then starts the server and waits for SIGINT/SIGTERM;
// tests start it themselves.
#pragma once

#include <optional>

#include "cli/commands.h"
#include "cli/serve_settings.h"
#include "common/command_line.h"
#include "server/server.h"

namespace earshot::cli {

struct ServeSetup {
  server::ServerConfig config;
  server::ServerHooks hooks;
};

// nullopt when --help was asked for (and printed). Throws earshot::Error for bad
// options, a missing model or VAD file, a language or policy the model lacks.
std::optional<ServeSetup> prepare_serve(const CommandArgs& argv);
// The same from settings already read; `args` (parsed, ServeSettings::declare'd)
// carries the stages' options, read when the chain loads.
ServeSetup prepare_serve(ServeSettings settings, const Args& args);

}  // namespace earshot::cli

// Subcommands of the `earshot` binary. Each lives in its own <name>_command.cpp
// and is listed once in main.cpp.
#pragma once

#include <string>
#include <vector>

namespace earshot::cli {

using CommandArgs = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const CommandArgs& args);
  const char* docs;  // the pages of docs/ that describe the command, shown by --help
};

int run_transcribe(const CommandArgs& args);             // transcribe_command.cpp
int run_serve(const CommandArgs& args);                  // serve_command.cpp
int run_pull(const CommandArgs& args);                   // pull_command.cpp
int run_models(const CommandArgs& args);                 // models_command.cpp
int run_quantize(const CommandArgs& args);               // quantize_command.cpp
int run_bench(const CommandArgs& args);                  // bench_command.cpp
int run_replay_translation(const CommandArgs& args);     // replay_translation_command.cpp
int run_calibrate_translation(const CommandArgs& args);  // calibrate_translation_command.cpp

}  // namespace earshot::cli

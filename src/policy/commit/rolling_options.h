// The rolling policy's command-line options over a prompted audio-LLM decoder
// (Qwen3-ASR), declared and read here (the policy's option group in
// policy/options.cpp): --rolling-unfixed-tokens, --rolling-unfixed-passes.
#pragma once

#include "common/command_line.h"
#include "policy/commit/rolling_decoder.h"

namespace earshot::policy::commit {

void declare_rolling_options(Args& args, CommandKind command);
// The options into `config` (its other fields kept), validated. Throws
// earshot::Error(kInvalidArgument) naming the options.
void read_rolling_options(const Args& args, CommandKind command, RollingConfig& config);

}  // namespace earshot::policy::commit

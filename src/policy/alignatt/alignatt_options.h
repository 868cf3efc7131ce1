// AlignAtt's command-line options, declared and read here (the policy's own
// option group in policy/options.cpp): on an attention decoder (Whisper)
// --frame-threshold, --audio-max-len, --audio-min-len, --init-prompt,
// --static-init-prompt, --max-context-tokens, --attention-window,
// --nonspeech-prob, --guards, --beams and, on transcribe, --never-fire; on a
// prompted audio-LLM decoder (Qwen3-ASR) --qwen3-trim.
#pragma once

#include <string>

#include "common/command_line.h"
#include "policy/alignatt/alignatt_config.h"
#include "policy/alignatt/prompted_alignatt.h"

namespace earshot::policy {

void declare_alignatt_options(Args& args, CommandKind command);
// The options into `config` (its other fields kept), validated
// (AlignAttConfig::validate). Throws earshot::Error(kInvalidArgument).
void read_alignatt_options(const Args& args, CommandKind command, AlignAttConfig& config);
// --beams with the policy a command runs (resolved: "alignatt", "localagreement"...):
// beam search is AlignAtt's. Throws Error(kInvalidArgument) "--beams applies to
// --policy alignatt only" for a width other than 1 with another policy.
void check_beams_policy(int beams, const std::string& policy);

void declare_prompted_alignatt_options(Args& args, CommandKind command);
void read_prompted_alignatt_options(const Args& args, CommandKind command, PromptedAlignAttConfig& config);

}  // namespace earshot::policy

// The vocabulary every stream of serve, transcribe and bench expects (--keyterms,
// --keyterm-bonus): the command's, not a policy's (the policies' own options are
// in policy/options.h, declared with the model's).
#pragma once

#include "common/command_line.h"
#include "common/keyterms.h"
#include "policy/alignatt/alignatt_config.h"

namespace earshot::cli {

// --keyterms FILE: the vocabulary every stream expects (one term per line, term:weight).
void declare_keyterm_options(Args& args);
// The command's vocabulary: --keyterms' file, with --static-init-prompt (WhisperLiveKit's
// option, read into `alignatt` by policy::read_options) moved out of the AlignAtt
// settings into its prompt text: Whisper's engine puts it back in the same place,
// verbatim, and the other families read it too (Qwen3-ASR's context, the
// transducers' phrases). Throws Error naming the option for an unreadable file or
// one over the limits.
Keyterms read_keyterms(const Args& args, policy::AlignAttConfig& alignatt);
// --keyterm-bonus (0 to 100; declared with --keyterms), for policy::Settings (ModelSpec::policies).
double read_keyterm_bonus(const Args& args);

}  // namespace earshot::cli

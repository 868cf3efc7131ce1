// What serve, transcribe and bench check or read about the policies beyond the
// policies' own options (policy/options.h, declared with the model's): --beams
// against the policy a command runs, and the vocabulary every stream expects
// (--keyterms, --keyterm-bonus).
#pragma once

#include <string>

#include "common/command_line.h"
#include "common/keyterms.h"
#include "policy/alignatt/alignatt_config.h"

namespace earshot::cli {

// --beams with the policy a command runs (resolved: "alignatt", "localagreement"...):
// beam search is AlignAtt's. Throws Error(kInvalidArgument) "--beams applies to
// --policy alignatt only" for a width other than 1 with another policy.
void check_beams_policy(int beams, const std::string& policy);

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

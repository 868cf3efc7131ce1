// The model's options on every command that loads one (serve, transcribe,
// bench), built from the policies' option groups (policy/options.h) and the
// family registry: the policies' settings, where and how the model runs
// (--device auto (default) | cpu | a ggml device name (`earshot version` lists
// them; CUDA0 in a CUDA build), --flash-attention on | off, --cpu-kernels, the
// command's own --threads, --batch-decode on serve and bench), then each
// family's own options (families.h), so a new family's options appear on every
// command without editing it.
#pragma once

#include <string>

#include "common/command_line.h"
#include "engine/model_spec.h"

namespace earshot::engine {

void declare_model_options(Args& args, CommandKind command);

// Every model option of `command` read and validated into a spec (its path left
// empty). --device: "cpu"; "auto" = the first GPU ggml offers, else the CPU; or a
// device by name. --flash-attention: the encoder's fused attention, on or off.
// --threads >= 1. --batch-decode N (serve and bench): model steps of up to N
// streams pending at once run as one graph; 0 = off (each family that batches
// checks the range). Throws earshot::Error(kInvalidArgument) for a bad value (an
// unknown device names the devices there are), naming the option.
// spec.policies holds the policies' options (policy::read_options) over their defaults;
// the command sets what it owns besides (serve: the language, the pause length).
ModelSpec read_model_spec(const Args& args, CommandKind command);

// --threads (CPU threads per model pass), the one check of it every command uses:
// auto is the cores (at most 8; serve's and bench's worker plan may then run
// fewer per pass, cli/worker_plan.h). Throws Error(kInvalidArgument) "--threads
// must be >= 1" below 1.
int read_threads(const Args& args);

// What the registered families offer, for --policy's help: "alignatt or
// localagreement (Whisper), alignatt or rolling (Qwen3-ASR), ..." (one choice), and
// "Whisper: alignatt, localagreement; Qwen3-ASR: ..." (a list).
std::string policy_choices();
std::string policy_lists();

}  // namespace earshot::engine

// The policies' command-line options: each policy declares and reads its own
// group (its folder's *_options.h), as a family does (engine/families.h) and a
// stage does (stages/registry.h); the table in options.cpp lists the groups, one
// line each. serve, transcribe and bench get them with the model's options
// (engine::declare_model_options, engine::read_model_spec), so a new policy's
// options reach every command without editing one.
#pragma once

#include <span>

#include "common/command_line.h"
#include "policy/registry.h"

namespace earshot::policy {

// One policy's options.
struct OptionGroup {
  const char* policy;  // whose ("alignatt", "alignatt over an audio LLM", ...): for docs and tests
  // Declares the group's options (names, help, defaults) on `command`'s table.
  void (*declare)(Args& args, CommandKind command);
  // Reads and validates them into the policy's part of `settings` (its other
  // parts, and the fields the group has no option for, kept). Throws
  // Error(kInvalidArgument) naming the option.
  void (*read)(const Args& args, CommandKind command, Settings& settings);
};

// Every policy's option group.
std::span<const OptionGroup> option_groups();

// Every group's options, declared on / read from `command`'s table.
void declare_options(Args& args, CommandKind command);
void read_options(const Args& args, CommandKind command, Settings& settings);

}  // namespace earshot::policy

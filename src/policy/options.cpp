#include "policy/options.h"

#include "policy/alignatt/alignatt_options.h"
#include "policy/commit/rolling_options.h"

namespace earshot::policy {

namespace {

constexpr OptionGroup kGroups[] = {
    {"alignatt", declare_alignatt_options,
     [](const Args& args, CommandKind command, Settings& s) { read_alignatt_options(args, command, s.alignatt); }},
    {"alignatt over an audio LLM", declare_prompted_alignatt_options,
     [](const Args& args, CommandKind command, Settings& s) {
       read_prompted_alignatt_options(args, command, s.prompted_alignatt);
     }},
    {"rolling over an audio LLM", commit::declare_rolling_options,
     [](const Args& args, CommandKind command, Settings& s) {
       commit::read_rolling_options(args, command, s.prompted_rolling);
     }},
};

}  // namespace

std::span<const OptionGroup> option_groups() { return kGroups; }

void declare_options(Args& args, CommandKind command) {
  for (const OptionGroup& g : kGroups) g.declare(args, command);
}

void read_options(const Args& args, CommandKind command, Settings& settings) {
  for (const OptionGroup& g : kGroups) g.read(args, command, settings);
}

}  // namespace earshot::policy

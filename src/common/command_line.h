// A small, strict command-line parser shared by every `earshot` subcommand and
// the baseline binaries: `--name value`, `--name=value`, boolean `--flag`,
// positional arguments, and a generated help text. Unknown options are errors,
// never silently ignored.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace earshot {

// Default for --threads: the machine's cores, at most 8 (ggml's threads spin while
// waiting, so more threads than cores only slows a pass down).
std::string default_thread_count();

// A comma-separated option value's items, each without surrounding spaces; empty
// items dropped ("a, b,,c" -> a, b, c).
std::vector<std::string> split_list(const std::string& text);

// The commands that load a model and run streams. The registries (model families
// in engine/families.h, stages in stages/registry.h) declare their options on the
// commands they serve.
enum class CommandKind { kServe, kTranscribe, kBench };

// What a command needs of its command line beyond the options it declares.
struct ArgsRules {
  std::vector<std::string> required;  // options that must be given a non-empty value
  bool positional = false;            // whether positional arguments may be given
};

class Args {
 public:
  Args(std::string command, std::string usage) : command_(std::move(command)), usage_(std::move(usage)) {}

  // Declares an option taking a value; default_value is shown in the help text.
  Args& option(std::string name, std::string help, std::string default_value = "");
  // Declares a boolean flag.
  Args& flag(std::string name, std::string help);

  // Parses argv (without the program and command names). Throws
  // earshot::Error(kInvalidArgument) naming the bad argument.
  void parse(const std::vector<std::string>& argv);
  // parse(), then the rules: prints the help and returns false when --help was
  // given (the command then exits 0); throws kInvalidArgument for a positional
  // argument the rules do not allow or a required option not given.
  bool parse_or_help(const std::vector<std::string>& argv, const ArgsRules& rules = {});

  bool help_requested() const { return help_; }
  std::string help() const;

  bool has(const std::string& name) const;         // given on the command line
  std::string get(const std::string& name) const;  // value or declared default
  double get_double(const std::string& name) const;
  long get_int(const std::string& name) const;
  // An on | off option: true for on; throws Error(kInvalidArgument) "--NAME must be
  // on or off, not 'VALUE'" for anything else.
  bool get_on_off(const std::string& name) const;
  bool get_flag(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  struct Spec {
    std::string help;
    std::string default_value;
    bool is_flag = false;
  };
  const Spec& spec(const std::string& name) const;

  std::string command_;
  std::string usage_;
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace earshot

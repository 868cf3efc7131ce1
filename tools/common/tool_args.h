// Command-line options of the developer tools: each option takes one value
// ("--name value"); --help or -h prints the usage.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace earshot::tools {

using OptionSetter = std::function<void(const std::string& value)>;

// Calls options.at(name)(value) for each "--name value" in argv, in order. --help or -h
// prints `usage` to stdout and exits 0. Throws earshot::Error(kInvalidArgument) for an
// unknown option (with the usage) or an option missing its value; a setter's own
// exceptions (std::stoi) pass through.
void parse_options(int argc, char** argv, const char* usage, const std::map<std::string, OptionSetter>& options);

// "1,2,4" -> {1, 2, 4}; throws earshot::Error(kInvalidArgument) naming `option`
// for an empty item or one that is not a whole number.
std::vector<int> parse_int_list(const std::string& text, const std::string& option);

}  // namespace earshot::tools

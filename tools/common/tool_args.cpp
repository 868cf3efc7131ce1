#include "tools/common/tool_args.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace earshot::tools {

void parse_options(int argc, char** argv, const char* usage, const std::map<std::string, OptionSetter>& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (const auto it = options.find(name); it != options.end()) {
      if (i + 1 >= argc) throw Error(ErrorCode::kInvalidArgument, name + " needs a value");
      it->second(argv[++i]);
    } else if (name == "--help" || name == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else {
      throw Error(ErrorCode::kInvalidArgument, "unknown option " + name + "\n" + usage);
    }
  }
}

std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw Error(ErrorCode::kInvalidArgument, option + ": '" + item + "' in '" + text + "' is not a whole number");
    out.push_back(value);
    at = comma + 1;
  }
  return out;
}

}  // namespace earshot::tools

#include "tools/common/tool_args.h"

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

}  // namespace earshot::tools

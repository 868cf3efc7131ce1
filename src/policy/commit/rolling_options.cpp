#include "policy/commit/rolling_options.h"

#include <string>

#include "common/error.h"

namespace earshot::policy::commit {

void declare_rolling_options(Args& args, CommandKind /*command*/) {
  args.option("rolling-unfixed-tokens",
              "Qwen3-ASR --policy rolling: tokens of the previous pass dropped from its end before it is forced as "
              "the next pass's prefix (Qwen3-ASR's unfixed_token_num)",
              "5");
  args.option("rolling-unfixed-passes",
              "Qwen3-ASR --policy rolling: passes of each segment decoded without a prefix (Qwen3-ASR's "
              "unfixed_chunk_num)",
              "2");
}

void read_rolling_options(const Args& args, CommandKind /*command*/, RollingConfig& config) {
  config.unfixed_tokens = static_cast<int>(args.get_int("rolling-unfixed-tokens"));
  config.unfixed_passes = static_cast<int>(args.get_int("rolling-unfixed-passes"));
  try {
    config.validate();
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("--rolling-unfixed-tokens/--rolling-unfixed-passes: ") + e.what());
  }
}

}  // namespace earshot::policy::commit

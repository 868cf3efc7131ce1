#include "cli/policy_options.h"

namespace earshot::cli {

void declare_alignatt_options(Args& args) {
  args.option("frame-threshold", "AlignAtt border: frames from the end of the audio", "25")
      .option("audio-max-len", "seconds of audio the policy keeps", "30")
      .option("audio-min-len", "seconds of audio before a pass returns words", "0")
      .option("init-prompt", "text that starts the scrolled context", "")
      .option("static-init-prompt", "text always kept in the context", "")
      .option("max-context-tokens", "cap on the text context (-1 = the model's)", "-1");
}

policy::AlignAttConfig read_alignatt_options(const Args& args, policy::AlignAttConfig config) {
  config.frame_threshold = static_cast<int>(args.get_int("frame-threshold"));
  config.audio_max_len = args.get_double("audio-max-len");
  config.audio_min_len = args.get_double("audio-min-len");
  config.init_prompt = args.get("init-prompt");
  config.static_init_prompt = args.get("static-init-prompt");
  config.max_context_tokens = static_cast<int>(args.get_int("max-context-tokens"));
  config.validate();
  return config;
}

}  // namespace earshot::cli

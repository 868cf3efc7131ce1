#include "policy/alignatt/alignatt_options.h"

#include <string>

#include "common/error.h"

namespace earshot::policy {

void declare_alignatt_options(Args& args, CommandKind command) {
  args.option("frame-threshold", "AlignAtt border: frames from the end of the audio", "25")
      .option("audio-max-len", "seconds of audio the policy keeps", "30")
      .option("audio-min-len", "seconds of audio before a pass returns words", "0")
      .option("init-prompt", "text that starts the scrolled context", "")
      .option("static-init-prompt", "text always kept in the context", "")
      .option("max-context-tokens", "cap on the text context (-1 = the model's)", "-1")
      .option(
          "attention-window",
          "AlignAtt: decoder calls the attention is normalised over: all (SimulStreaming) or N (WhisperLiveKit: 16)",
          "all")
      .option("nonspeech-prob", "AlignAtt: no-speech probability that ends a pass (1 = never, as SimulStreaming)",
              "0.5")
      .option("guards", "AlignAtt token-budget, repetition and stale-word guards: on, or off (as SimulStreaming)", "on")
      .option("beams", "AlignAtt: beam search width (1 = greedy)", "1");
  if (command == CommandKind::kTranscribe)
    args.flag("never-fire", "AlignAtt: hold the last word of each pass until the next pass");
}

void read_alignatt_options(const Args& args, CommandKind command, AlignAttConfig& config) {
  config.frame_threshold = static_cast<int>(args.get_int("frame-threshold"));
  config.audio_max_len = args.get_double("audio-max-len");
  config.audio_min_len = args.get_double("audio-min-len");
  config.init_prompt = args.get("init-prompt");
  config.static_init_prompt = args.get("static-init-prompt");
  config.max_context_tokens = static_cast<int>(args.get_int("max-context-tokens"));
  const std::string window = args.get("attention-window");
  if (window == "all") {
    config.attention_window = 0;
  } else {
    config.attention_window = static_cast<int>(args.get_int("attention-window"));
    if (config.attention_window < 1) {
      throw Error(ErrorCode::kInvalidArgument, "--attention-window must be all or a count >= 1, got " + window);
    }
  }
  config.nonspeech_prob = args.get_double("nonspeech-prob");
  const std::string guards = args.get("guards");
  if (guards != "on" && guards != "off") {
    throw Error(ErrorCode::kInvalidArgument, "--guards must be on or off, got '" + guards + "'");
  }
  config.set_guards(guards == "on");
  config.beams = static_cast<int>(args.get_int("beams"));
  if (command == CommandKind::kTranscribe) config.never_fire = args.get_flag("never-fire");
  config.validate();
}

void check_beams_policy(int beams, const std::string& policy) {
  if (policy != "alignatt" && beams != 1)
    throw Error(ErrorCode::kInvalidArgument, "--beams applies to --policy alignatt only");
}

void declare_prompted_alignatt_options(Args& args, CommandKind /*command*/) {
  args.option("qwen3-trim",
              "Qwen3-ASR --policy alignatt: how the 15 s buffer loses its front: window (whole 8 s encoder "
              "windows, so the windows left keep their encoder output and prompt KV rows; 7-15 s stay) or sliding "
              "(the last 15 s at any sample, as WhisperLiveKit's qwen3_simul: every window and the whole prompt "
              "are redone each pass once the buffer is full)",
              "window");
}

void read_prompted_alignatt_options(const Args& args, CommandKind /*command*/, PromptedAlignAttConfig& config) {
  const std::string trim = args.get("qwen3-trim");
  if (trim != "window" && trim != "sliding")
    throw Error(ErrorCode::kInvalidArgument, "--qwen3-trim must be window or sliding, not '" + trim + "'");
  config.trim = trim == "window" ? PromptedAlignAttConfig::Trim::kWindow : PromptedAlignAttConfig::Trim::kSliding;
  config.validate();
}

}  // namespace earshot::policy

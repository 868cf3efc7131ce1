#include "cli/policy_options.h"

#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace earshot::cli {

void declare_alignatt_options(Args& args) {
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
      .option("guards", "AlignAtt token-budget, repetition and stale-word guards: on, or off (as SimulStreaming)",
              "on");
}

void check_beams_policy(int beams, const std::string& policy) {
  if (policy != "alignatt" && beams != 1)
    throw Error(ErrorCode::kInvalidArgument, "--beams applies to --policy alignatt only");
}

policy::AlignAttConfig read_alignatt_options(const Args& args, policy::AlignAttConfig config) {
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
  config.validate();
  return config;
}

void declare_keyterm_options(Args& args) {
  args.option("keyterms",
              "a file of terms every stream expects (names, products, jargon): one per line, optionally "
              "term:weight; a stream's own (Deepgram keyterm/keywords, OpenAI prompt) are added. Whisper and "
              "Qwen3-ASR read them as prompt text, transducers and Voxtral Realtime boost them (--keyterm-bonus)",
              "");
  args.option("keyterm-bonus",
              "transducers and Voxtral Realtime: log-probability bonus per piece of a keyterm phrase (times the "
              "term's weight; taken back when the phrase breaks off)",
              "1.5");
}

double read_keyterm_bonus(const Args& args) {
  const double bonus = args.get_double("keyterm-bonus");
  if (!(bonus >= 0 && bonus <= 100)) throw Error(ErrorCode::kInvalidArgument, "--keyterm-bonus must be 0 to 100");
  return bonus;
}

Keyterms read_keyterms(const Args& args, policy::AlignAttConfig& alignatt) {
  Keyterms keyterms;
  const std::string file = args.get("keyterms");
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw Error(ErrorCode::kInvalidArgument, "--keyterms: cannot read '" + file + "'");
    std::stringstream text;
    text << in.rdbuf();
    keyterms = parse_keyterms_list(text.str(), "--keyterms " + file);
  }
  keyterms.prompt = alignatt.static_init_prompt;
  alignatt.static_init_prompt.clear();
  keyterms.check_limits("--keyterms");
  return keyterms;
}

}  // namespace earshot::cli

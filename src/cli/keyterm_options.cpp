#include "cli/keyterm_options.h"

#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace earshot::cli {

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

#include "engine/whisper/registration.h"

#include "common/error.h"
#include "engine/whisper/options.h"
#include "engine/whisper/whisper_engine.h"
#include "model/whisper/quantize.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind command) {
  if (command == CommandKind::kBench)
    args.option("encoder-input", "full (30 s window, like whisper.cpp) or audio (only the audio present)", "full");
}

void read(const Args& args, CommandKind command, ModelSpec& spec) {
  if (command != CommandKind::kBench) return;
  const std::string encoder_input = args.get("encoder-input");
  if (encoder_input != "full" && encoder_input != "audio")
    throw Error(ErrorCode::kInvalidArgument, "--encoder-input must be full or audio");
  spec.options<WhisperOptions>().encoder_input =
      encoder_input == "full" ? whisper::EncoderInput::kFullWindow : whisper::EncoderInput::kAudioOnly;
}

// "encoder input full, flash attention, beams 1"
std::string how_it_runs(const ModelSpec& spec, const std::string& policy) {
  const bool full = spec.options<WhisperOptions>().encoder_input == whisper::EncoderInput::kFullWindow;
  return std::string("encoder input ") + (full ? "full" : "audio") + ", " + describe_encoder_kernels(spec.runtime) +
         (policy == "alignatt" ? ", beams " + std::to_string(spec.policies.alignatt.beams) : "");
}

}  // namespace

Family whisper_family() {
  Family f;
  f.name = "whisper";
  f.display_name = "Whisper";
  f.accepts = [](const ModelFile& file) { return file.kind == ModelFileKind::kGgmlWhisper; };
  f.load = load_whisper_engine;
  f.quantize = [](const ModelFile&, const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                  quantize::QuantizeReport& report) { whisper::quantize_file(in, out, type, report); };
  f.summarize = [](const ModelFile&, const std::filesystem::path& path) { return whisper::summarize_file(path); };
  f.offers = {{"Whisper", policy::policy_names<AsrDecoder>()}};
  f.declare_options = declare;
  f.read_options = read;
  f.describe = how_it_runs;
  f.catalogue = whisper_catalogue;
  return f;
}

}  // namespace earshot::engine

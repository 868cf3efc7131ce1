#include "engine/whisper/registration.h"

#include "common/error.h"
#include "engine/whisper/options.h"
#include "engine/whisper/whisper_engine.h"
#include "model/whisper/quantize.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind /*command*/) {
  args.option("encoder-input",
              "full (the 30 s window Whisper models are trained on, as whisper.cpp and WhisperLiveKit run it) or "
              "audio (the audio present and at least 0.64 s of padding, rounded up to 1 s: shorter passes over short "
              "buffers, e.g. with --audio-max-len 10, for quick ends of turn on few cores; a real model may lose "
              "accuracy: measure it with earshot bench)",
              "full");
}

void read(const Args& args, CommandKind /*command*/, ModelSpec& spec) {
  const std::string encoder_input = args.get("encoder-input");
  if (encoder_input != "full" && encoder_input != "audio")
    throw Error(ErrorCode::kInvalidArgument, "--encoder-input must be full or audio");
  spec.options<WhisperOptions>().encoder_input =
      encoder_input == "full" ? whisper::EncoderInput::kFullWindow : whisper::EncoderInput::kAudioOnly;
}

// --encoder-input audio asks what only Whisper's encoder does.
std::string foreign_request(const ModelSpec& spec, const std::string& file_is) {
  if (spec.options<WhisperOptions>().encoder_input == whisper::EncoderInput::kFullWindow) return "";
  return "--encoder-input audio applies to Whisper models only; model file " + spec.path.string() + " is " + file_is +
         ": leave --encoder-input out";
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
  f.foreign_request = foreign_request;
  f.describe = how_it_runs;
  f.catalogue = whisper_catalogue;
  return f;
}

}  // namespace earshot::engine

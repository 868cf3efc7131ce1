#include "engine/voxtral/registration.h"

#include "common/error.h"
#include "engine/voxtral/options.h"
#include "engine/voxtral/voxtral_engine.h"
#include "model/quantize/quantize.h"
#include "model/voxtral/model.h"
#include "model/voxtral/quantize.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind command) {
  args.option("delay-ms",
              std::string("Voxtral Realtime: how far its text trails the audio, as trained: 80, 160, ..., 1200 "
                          "(multiples of 80) or 2400 ms; 0 = the file's default (480 ms)") +
                  (command == CommandKind::kServe ? "; a stream may ask for its own (delay_ms on every protocol)" : ""),
              "0");
}

void read(const Args& args, CommandKind /*command*/, ModelSpec& spec) {
  const long ms = args.get_int("delay-ms");
  if (ms < 0 || ms > 2400) throw Error(ErrorCode::kInvalidArgument, "--delay-ms must be 0 to 2400");
  spec.options<VoxtralOptions>().delay_ms = static_cast<int>(ms);
}

// --delay-ms is Voxtral's; a model of another family refuses it rather than ignore it.
std::string foreign_request(const ModelSpec& spec, const std::string& file_is) {
  const int delay_ms = spec.options<VoxtralOptions>().delay_ms;
  if (delay_ms == 0) return "";
  return "--delay-ms " + std::to_string(delay_ms) + " applies to Voxtral Realtime models only; model file " +
         spec.path.string() + " is " + file_is + ": leave --delay-ms out";
}

std::string how_it_runs(const ModelSpec& spec, const std::string& /*policy*/) {
  const int delay_ms = spec.options<VoxtralOptions>().delay_ms;
  return delay_ms == 0 ? "the file's delay" : "delay " + std::to_string(delay_ms) + " ms";
}

}  // namespace

Family voxtral_family() {
  Family f;
  f.name = "voxtral";
  f.display_name = "Voxtral Realtime";
  f.accepts = [](const ModelFile& file) {
    return file.kind == ModelFileKind::kGguf && file.architecture == voxtral::kGgufArchitecture;
  };
  f.load = load_voxtral_engine;
  f.quantize = [](const ModelFile&, const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                  quantize::QuantizeReport& report) { voxtral::quantize_file(in, out, type, report); };
  f.summarize = [](const ModelFile&, const std::filesystem::path& path) {
    return quantize::FileSummary{"Voxtral Realtime", "transcribe.cpp GGUF",
                                 quantize::gguf_matrix_types(path, voxtral::is_matrix_tensor)};
  };
  f.offers = {{"Voxtral Realtime", policy::policy_names<StreamingTransducer>()}};
  f.declare_options = declare;
  f.read_options = read;
  f.foreign_request = foreign_request;
  f.describe = how_it_runs;
  f.catalogue = voxtral_catalogue;
  return f;
}

}  // namespace earshot::engine

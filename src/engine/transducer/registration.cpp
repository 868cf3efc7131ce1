#include "engine/transducer/registration.h"

#include "common/error.h"
#include "engine/transducer/options.h"
#include "engine/transducer/transducer_engine.h"
#include "model/fastconformer/model.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind /*command*/) {
  args.option("lookahead-ms",
              "a cache-aware streaming transducer's chunk (Nemotron streaming: 80, 160, 560 or 1120 ms, as the "
              "model file allows): words come that much after their audio; 0 = the model's default",
              "0");
}

// --lookahead-ms (0 = the model's default): a negative value fails here, the rest
// against the file when it loads.
void read(const Args& args, CommandKind /*command*/, ModelSpec& spec) {
  const long ms = args.get_int("lookahead-ms");
  if (ms < 0 || ms > 100000) throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms must be 0 to 100000");
  spec.options<TransducerOptions>().lookahead_ms = static_cast<int>(ms);
}

// --lookahead-ms is a cache-aware streaming transducer's chunk; a model of
// another family refuses it rather than ignore what the user asked for.
std::string foreign_request(const ModelSpec& spec, const std::string& file_is) {
  const int lookahead_ms = spec.options<TransducerOptions>().lookahead_ms;
  if (lookahead_ms == 0) return "";
  return "--lookahead-ms " + std::to_string(lookahead_ms) +
         " applies to cache-aware streaming transducers only (family transducer: Nemotron streaming files); model "
         "file " +
         spec.path.string() + " is " + file_is + ", which has no lookahead: leave --lookahead-ms out";
}

std::string how_it_runs(const ModelSpec& spec, const std::string& /*policy*/) {
  return describe_encoder_kernels(spec.runtime);
}

}  // namespace

Family transducer_family() {
  Family f;
  f.name = "transducer";
  f.display_name = "FastConformer transducer";
  f.accepts = fastconformer::reads_model_file;
  f.load = load_transducer_engine;
  f.offers = {{"Parakeet", {"rolling", "native"}}, {"Nemotron streaming", {"native"}}};
  f.declare_options = declare;
  f.read_options = read;
  f.foreign_request = foreign_request;
  f.describe = how_it_runs;
  return f;
}

}  // namespace earshot::engine

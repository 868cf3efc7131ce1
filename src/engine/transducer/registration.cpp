#include "engine/transducer/registration.h"

#include "common/error.h"
#include "engine/transducer/options.h"
#include "engine/transducer/transducer_engine.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/quantize.h"

namespace earshot::engine {

namespace {

void declare(Args& args, CommandKind /*command*/) {
  args.option("lookahead-ms",
              "a cache-aware streaming transducer's chunk (Nemotron streaming: 80, 160, 560 or 1120 ms, as the "
              "model file allows): words come that much after their audio; 0 = the model's default",
              "0");
  args.option("nemo-mel-frames",
              "FastConformer transducers: feature frames of n samples: nemo (n/160, as NeMo's preprocessor keeps "
              "them) or libparakeet (n/160 + 1, as whisper.cpp's Parakeet and NeMo before 2.4 count them)",
              "nemo");
  args.option("transducer-beams",
              "FastConformer transducers: beam search width (1 = greedy); the beam runs within each decoding pass "
              "(a window, a rolling pass or a streaming chunk) and the best hypothesis carries on",
              "1");
}

// --lookahead-ms (0 = the model's default): a negative value fails here, the rest
// against the file when it loads.
void read(const Args& args, CommandKind /*command*/, ModelSpec& spec) {
  const long ms = args.get_int("lookahead-ms");
  if (ms < 0 || ms > 100000) throw Error(ErrorCode::kInvalidArgument, "--lookahead-ms must be 0 to 100000");
  spec.options<TransducerOptions>().lookahead_ms = static_cast<int>(ms);
  const std::string mel_frames = args.get("nemo-mel-frames");
  if (mel_frames != "nemo" && mel_frames != "libparakeet")
    throw Error(ErrorCode::kInvalidArgument, "--nemo-mel-frames must be nemo or libparakeet, not '" + mel_frames + "'");
  spec.options<TransducerOptions>().mel_frames =
      mel_frames == "nemo" ? features::NemoFrameCount::kNemo : features::NemoFrameCount::kLibparakeet;
  const long beams = args.get_int("transducer-beams");
  if (beams < 1 || beams > 64) throw Error(ErrorCode::kInvalidArgument, "--transducer-beams must be 1 to 64");
  spec.options<TransducerOptions>().beams = static_cast<int>(beams);
}

// --lookahead-ms is a cache-aware streaming transducer's chunk; a model of
// another family refuses it rather than ignore what the user asked for.
std::string foreign_request(const ModelSpec& spec, const std::string& file_is) {
  const TransducerOptions own = spec.options<TransducerOptions>();
  if (own.beams != 1)
    return "--transducer-beams " + std::to_string(own.beams) +
           " applies to FastConformer transducers only; model file " + spec.path.string() + " is " + file_is +
           ": use --beams for Whisper's AlignAtt";
  const int lookahead_ms = own.lookahead_ms;
  if (lookahead_ms == 0) return "";
  return "--lookahead-ms " + std::to_string(lookahead_ms) +
         " applies to cache-aware streaming transducers only (family transducer: Nemotron streaming files); model "
         "file " +
         spec.path.string() + " is " + file_is + ", which has no lookahead: leave --lookahead-ms out";
}

std::string how_it_runs(const ModelSpec& spec, const std::string& /*policy*/) {
  const TransducerOptions own = spec.options<TransducerOptions>();
  const bool libparakeet = own.mel_frames == features::NemoFrameCount::kLibparakeet;
  return describe_encoder_kernels(spec.runtime) + (libparakeet ? ", libparakeet's mel frames" : "") +
         (own.beams > 1 ? ", beam " + std::to_string(own.beams) : "");
}

}  // namespace

Family transducer_family() {
  Family f;
  f.name = "transducer";
  f.display_name = "FastConformer transducer";
  f.accepts = fastconformer::reads_model_file;
  f.load = load_transducer_engine;
  f.quantize = fastconformer::quantize_file;
  f.summarize = fastconformer::summarize_file;
  f.offers = {{"Parakeet", policy::policy_names<OfflineTransducer>()},
              {"Nemotron streaming", policy::policy_names<StreamingTransducer>()}};
  f.declare_options = declare;
  f.read_options = read;
  f.foreign_request = foreign_request;
  f.describe = how_it_runs;
  f.catalogue = transducer_catalogue;
  return f;
}

}  // namespace earshot::engine

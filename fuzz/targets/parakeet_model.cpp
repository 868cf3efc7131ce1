// The FastConformer transducer loader (fastconformer::Model::load): whisper.cpp's
// legacy Parakeet .bin (header, filter bank, window, durations, pieces, tensor
// records) and earshot's GGUF (every flag as a key, the featuriser tensors, the
// tensor table), told apart by the first bytes; weights placed on the CPU and the
// decoder's host weights read. A file that loads then runs the prediction net and
// one joint step, as a stream's first step does.
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "fuzz_input.h"
#include "model/fastconformer/model.h"
#include "model/transducer/decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& path = earshot::fuzz::temp_file(".model");
  if (!earshot::fuzz::write_temp_file(path, data, size)) return 0;
  try {
    const auto model = earshot::fastconformer::Model::load(path);
    const earshot::transducer::DecoderWeights& w = model->decoder_weights();
    earshot::transducer::Decoder decoder(&w);
    earshot::transducer::DecoderState state = decoder.initial_state();
    const std::vector<float> frame(static_cast<size_t>(w.joint_enc.cols), 0.5f);
    std::vector<earshot::transducer::Emission> emissions;
    decoder.greedy(decoder.project_encoder(frame, 1), 1, state, emissions);
    earshot::fuzz::check(emissions.size() <= static_cast<size_t>(w.max_symbols), "more emissions than max_symbols");
    for (const auto& e : emissions)
      earshot::fuzz::check(e.token >= 0 && e.token < w.n_vocab, "an emission outside the vocabulary");
  } catch (const earshot::Error&) {
  }
  return 0;
}

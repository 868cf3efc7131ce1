// Writes a FastConformer transducer in both formats Model::load reads, from
// float values: whisper.cpp's legacy Parakeet .bin (f32 or f16 matrices, the
// rest f32, as its converter writes) and earshot's GGUF (any ggml type for the
// matrices). The random-weight generator (tools/make_parakeet) and the tests
// write through here, so both files of one model hold the same weights.
#pragma once

#include <ggml.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model/fastconformer/model.h"

namespace earshot::fastconformer {

struct ModelData {
  Hparams hparams;
  std::vector<float> mel_filters;  // [n_mels][n_fft/2 + 1]
  std::vector<float> window;
  std::vector<std::string> pieces;
  // In expected_tensors() order: name, type and shape from there, values here.
  std::vector<runtime::ExpectedTensor> tensors;
  std::vector<std::vector<float>> values;
};

// Throws Error(kInvalidArgument) for a type the legacy format cannot hold, kIo on write errors.
void write_legacy(const std::filesystem::path& path, const ModelData& model);
void write_gguf(const std::filesystem::path& path, const ModelData& model);

}  // namespace earshot::fastconformer

// Writes random-weight Whisper models in whisper.cpp's legacy ggml format, at
// any dimensions, reproducibly from a seed. No real weights exist on the build
// machines; random weights at real dimensions exercise the same code paths and
// measure real speed, and parity against libwhisper does not need trained weights.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "model/whisper/hparams.h"
#include "model/whisper/model_format.h"

namespace earshot::whisper {

struct RandomModelSpec {
  // A for-tests-ggml-*.bin template (header, vocabulary, 80-bin mel filters, no tensors).
  std::filesystem::path template_path;
  // Dimensions to write; ftype/quantization_version are ignored (weight_type decides).
  // Start from read_file_header(template_path).hparams and override fields.
  Hparams hparams;
  ggml_type weight_type = GGML_TYPE_F16;
  uint64_t seed = 0;
  // Optional `base64(bytes) rank` file whose exact token bytes replace the
  // template's (the templates store some byte tokens as U+FFFD).
  std::filesystem::path vocab_tiktoken;
};

// Writes the model; the bytes depend only on the spec (same spec, same file).
// Throws kInvalidArgument for dimensions the format or the weight type cannot
// hold, kIo when the file cannot be written.
void write_random_model(const RandomModelSpec& spec, const std::filesystem::path& out);

// The values the writer draws for one tensor, before conversion to its storage
// type: matrices N(0, 1/sqrt(fan_in)), biases N(0, 0.02), LayerNorm weights
// 1 + N(0, 0.1), token embeddings N(0, 3/sqrt(n_state)) (logits neither flat
// nor one-hot), positional embeddings N(0, 0.1).
std::vector<float> random_tensor_values(uint64_t seed, const TensorSpec& tensor);

// The exact bytes the writer stores for one tensor (values converted to
// tensor.type: f32, f16, or quantised with ggml_quantize_chunk row by row).
std::vector<uint8_t> random_tensor_bytes(uint64_t seed, const TensorSpec& tensor);

}  // namespace earshot::whisper

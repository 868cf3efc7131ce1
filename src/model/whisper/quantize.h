// Quantising a Whisper model file (whisper.cpp's legacy ggml .bin) and naming
// what one holds: the whisper family's Family::quantize and Family::summarize.
// Quantised are the tensors the weight type governs (attention and MLP
// matrices, the token embedding), as whisper.cpp's quantize tool does; conv
// kernels become f16, biases, norms and positional embeddings keep their types.
// earshot's Whisper loader reads q4_0, q4_1, q5_0, q5_1 and q8_0.
#pragma once

#include <ggml.h>

#include <filesystem>

#include "model/quantize/quantize.h"

namespace earshot::whisper {

// Writes `out` from `in` (an f32 or f16 file). Throws Error(kInvalidArgument) for a
// quantised input or a type the loader does not read, kInvalidModel, kIo.
void quantize_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                   quantize::QuantizeReport& report);
// Family "Whisper", layout "whisper.cpp ggml .bin", its weight type.
quantize::FileSummary summarize_file(const std::filesystem::path& path);

}  // namespace earshot::whisper

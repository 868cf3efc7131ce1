// Quantising a FastConformer transducer file and naming what one holds: the
// transducer family's Family::quantize and Family::summarize. Quantised are the
// matrices of is_matrix_tensor (linears, pointwise convs, the prediction net's
// embedding and LSTM, the joint), each only when its rows are whole blocks of
// the type (whisper.cpp's parakeet-quantize keeps the 640-wide prediction
// matrices f32 for the k-quants the same way); depthwise and subsampling convs,
// biases, norms and pos_bias_u/v stay as they are. Every type of
// quantize::quantize_types() is written.
#pragma once

#include <ggml.h>

#include <filesystem>

#include "model/quantize/quantize.h"
#include "model/runtime/model_file.h"

namespace earshot::fastconformer {

// Writes `out` from `in`, a file reads_model_file takes with f32 or f16
// matrices: whisper.cpp's Parakeet .bin or earshot's GGUF (the GGUFs other
// projects publish are refused, kUnsupported). Throws Error(kInvalidArgument)
// for a quantised input, kInvalidModel, kIo.
void quantize_file(const runtime::ModelFileProbe& probe, const std::filesystem::path& in,
                   const std::filesystem::path& out, ggml_type type, quantize::QuantizeReport& report);
// Family "FastConformer transducer", the layout, the types of its matrices.
quantize::FileSummary summarize_file(const runtime::ModelFileProbe& probe, const std::filesystem::path& path);

}  // namespace earshot::fastconformer

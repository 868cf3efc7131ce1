// Quantising a Voxtral Realtime file to transcribe.cpp's presets: the voxtral
// family's Family::quantize (`earshot quantize voxtral-bf16.gguf q4.gguf q4_K`,
// what scripts/convert/voxtral_gguf.py's output is for). Each tensor gets the
// type the preset gives it (layout.h's tensor_type: linears the preset's type,
// Q4_K_M's attention outputs Q8_0 and token embedding Q6_K, conv kernels F32,
// norms, biases and the front end's tables F32); the file is streamed a tensor
// at a time (a real-dimension BF16 file is 8.9 GB).
#pragma once

#include <ggml.h>

#include <filesystem>
#include <optional>

#include "model/quantize/quantize.h"
#include "model/voxtral/layout.h"

namespace earshot::voxtral {

// The preset `earshot quantize`'s TYPE names: q8_0 -> Q8_0, q6_K -> Q6_K,
// q5_K -> Q5_K_M, q4_K -> Q4_K_M; nullopt for the other types.
std::optional<Preset> preset_of_type(ggml_type type);

// Writes `out` from `in` (linears in F32, F16 or BF16). Throws
// Error(kInvalidArgument) for a type that names no preset or an input whose
// linears are quantised, kInvalidModel for a file of another layout, kIo.
void quantize_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                   quantize::QuantizeReport& report);

}  // namespace earshot::voxtral

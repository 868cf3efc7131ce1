// Quantising earshot-layout model files (`earshot quantize IN OUT TYPE`), and
// naming what a model file is (`earshot models`).
//
// Which tensors are quantised follows whisper.cpp's quantize tools and what
// earshot's loaders read:
//  - Whisper (legacy ggml .bin, f32/f16 in): the tensors the weight type governs
//    (attention and MLP matrices, the token embedding); conv kernels, biases,
//    norms and positional embeddings keep their types, as whisper.cpp's quantize
//    leaves them. earshot's Whisper loader reads q4_0, q4_1, q5_0, q5_1, q8_0.
//  - FastConformer transducers (whisper.cpp's Parakeet .bin and earshot's GGUF):
//    the matrices of fastconformer::is_matrix_tensor (linears, pointwise convs,
//    the prediction net's embedding and LSTM, the joint), each only when its rows
//    are whole blocks of the type (whisper.cpp's parakeet-quantize keeps the
//    640-wide prediction matrices f32 for the k-quants the same way); depthwise
//    and subsampling convs, biases, norms, pos_bias_u/v stay as they are.
//    Every type of `quantize_types()` is written.
// The input must hold f32/f16 matrices: a quantised file is refused (quantise
// from the f16 or f32 file).
#pragma once

#include <ggml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::quantize {

// The types `earshot quantize` writes: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K.
const std::vector<ggml_type>& quantize_types();
// ggml's name of one of those, case-insensitively ("q8_0", "Q4_K", "q4_k"); nullopt otherwise.
std::optional<ggml_type> parse_quantize_type(std::string_view name);

struct QuantizeReport {
  std::string family;  // "Whisper", "FastConformer transducer"
  std::string layout;  // "whisper.cpp ggml .bin", "whisper.cpp Parakeet .bin", "earshot GGUF"
  int n_quantized = 0;
  // Matrices left in their type because their rows are not whole blocks of the type.
  std::vector<std::string> kept_partial_rows;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
};

// Writes `out` (through out.part, renamed when complete). Throws Error:
// kInvalidArgument for a type the family's loader does not read, kInvalidModel /
// kUnsupported for a file this does not quantise (naming what it is), kIo.
QuantizeReport quantize_model_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type);

// What a model file is, for listings: family ("Whisper", "FastConformer
// transducer", "Silero VAD", "Qwen3-ASR", "LLM (qwen3)" ...), layout (whisper.cpp
// ggml .bin, earshot GGUF, llama.cpp GGUF ...) and the types of its matrices
// ("f16", "q8_0", "q4_K + f32" ...). Never throws: an unreadable file says so in family.
struct FileSummary {
  std::string family, layout, quantization;
};
FileSummary summarize_model_file(const std::filesystem::path& path);

}  // namespace earshot::quantize

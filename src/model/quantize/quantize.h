// The mechanism behind `earshot quantize` and `earshot models`: rewriting a
// model file with some of its tensors quantised, writing it safely (OUT.part,
// renamed when complete), and naming the types a file's matrices hold. Which
// tensors a file quantises, and what its file is called, is each family's
// (Family::quantize and Family::summarize in engine/families.h: whisper's in
// model/whisper/quantize.h, the FastConformer transducers' in
// model/fastconformer/quantize.h); engine/model_files.h picks the family.
//
//   quantize::rewrite_legacy_file(in, part, offset, ftype_at, ftype,
//       [&](const quantize::TensorInfo& t) { return is_matrix(t.name) ? type : t.type; }, report);
#pragma once

#include <ggml.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::quantize {

// The types `earshot quantize` writes: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K.
const std::vector<ggml_type>& quantize_types();
// ggml's name of one of those, case-insensitively ("q8_0", "Q4_K", "q4_k"); nullopt otherwise.
std::optional<ggml_type> parse_quantize_type(std::string_view name);
// ggml_ftype of one of those (a legacy header's ftype field, GGUF's general.file_type); -1 otherwise.
int32_t file_type_of(ggml_type type);
bool is_float(ggml_type type);  // f32 or f16

// `n_rows` rows of `n_per_row` values of type `from` (f32, f16 or bf16) as type
// `to` (f32, f16, bf16 or a quantised type that needs no importance matrix),
// a quantised type's rows split over every core (the bytes do not depend on it).
std::vector<uint8_t> convert_rows(ggml_type to, ggml_type from, const uint8_t* data, int64_t n_per_row, int64_t n_rows);

struct QuantizeReport {
  std::string family;  // "Whisper", "FastConformer transducer"
  std::string layout;  // "whisper.cpp ggml .bin", "whisper.cpp Parakeet .bin", "earshot GGUF"
  int n_quantized = 0;
  // Matrices left in their type because their rows are not whole blocks of the type.
  std::vector<std::string> kept_partial_rows;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
};

// What a model file is, for listings: family ("Whisper", "FastConformer
// transducer", "Silero VAD", "Qwen3-ASR", "LLM (qwen3)" ...), layout (whisper.cpp
// ggml .bin, earshot GGUF, llama.cpp GGUF ...) and the types of its matrices
// ("f16", "q8_0", "q4_K + f32" ...).
struct FileSummary {
  std::string family, layout, quantization;
};

// One tensor of the file being rewritten, as the family's choice of type sees it.
struct TensorInfo {
  const std::string& name;
  int n_dims;
  std::array<int64_t, 4> ne;
  ggml_type type;
};
// The type a tensor is written in: its own keeps it, another type converts it
// (from f32 or f16 only).
using ChooseType = std::function<ggml_type(const TensorInfo& tensor)>;

// whisper.cpp's legacy layout: copies the header (the bytes before
// `tensors_offset`, the int32 at `ftype_offset` replaced by `ftype`), then each
// tensor record in the type `choose` gives it. Throws Error(kInvalidModel) for a
// malformed record, kIo.
void rewrite_legacy_file(const std::filesystem::path& in, const std::filesystem::path& out, uint64_t tensors_offset,
                         uint64_t ftype_offset, int32_t ftype, const ChooseType& choose, QuantizeReport& report);
// GGUF: every key (general.file_type and general.quantization_version set for
// `type`), each tensor in the type `choose` gives it.
void rewrite_gguf_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                       const ChooseType& choose, QuantizeReport& report);

// Writes `out` through `out.part` with `write`: refuses a type not in
// quantize_types() and an `out` that is `in` (kInvalidArgument) before calling
// it, then a result with nothing quantised (kInvalidArgument, naming the
// type's block), and removes the part on any error.
QuantizeReport write_quantized(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                               const std::function<void(const std::filesystem::path& part, QuantizeReport&)>& write);

// Bytes per type of a legacy file's tensors after `tensors_offset` that `counted` selects.
std::map<ggml_type, uint64_t> legacy_tensor_bytes(const std::filesystem::path& path, uint64_t tensors_offset,
                                                  const std::function<bool(const TensorInfo&)>& counted);
// Distinct types, the one holding most bytes first ("q8_0 + f32"; "-" for none).
std::string type_mix(const std::map<ggml_type, uint64_t>& bytes);

// type_mix of a GGUF file's matrices: the tensors `is_matrix` takes by name, or
// without it every tensor of two or more dimensions.
std::string gguf_matrix_types(const std::filesystem::path& path,
                              const std::function<bool(const std::string& name)>& is_matrix = {});

// What a file no family reads is: Silero VAD, a llama.cpp GGUF (an LLM, an
// mmproj) with the types of its 2-D and larger tensors, or "unknown" with what
// its first bytes look like. Throws what the probe throws (kIo, kInvalidModel).
FileSummary summarize_other_file(const std::filesystem::path& path);

}  // namespace earshot::quantize

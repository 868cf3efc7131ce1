#include "model/whisper/quantize.h"

#include <string>
#include <unordered_map>

#include "common/error.h"
#include "model/whisper/model_format.h"

namespace earshot::whisper {

void quantize_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                   quantize::QuantizeReport& report) {
  report.family = "Whisper", report.layout = "whisper.cpp ggml .bin";
  const FileHeader header = read_file_header(in);
  if (header.hparams.ftype != 0 && header.hparams.ftype != 1)
    throw Error(ErrorCode::kInvalidArgument, "model file " + in.string() + " is already quantised (" +
                                                 std::string(type_name(*weight_type_of_ftype(header.hparams.ftype))) +
                                                 "): quantise from its f16 or f32 file");
  Hparams h = header.hparams;
  h.ftype = ftype_of_weight_type(type);
  h.quantization_version = GGML_QNT_VERSION;
  if (h.ftype < 0)
    throw Error(ErrorCode::kInvalidArgument, std::string("earshot's Whisper loader reads q4_0, q4_1, q5_0, q5_1 and "
                                                         "q8_0 weights, not ") +
                                                 ggml_type_name(type));
  try {
    validate_hparams(h);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("cannot quantise to ") + ggml_type_name(type) + ": " + e.what());
  }
  std::unordered_map<std::string, ggml_type> types;
  for (const TensorSpec& s : model_tensor_specs(h, type)) types.emplace(s.name, s.type);
  // The header: magic, then ten int32 hparams, ftype the last.
  quantize::rewrite_legacy_file(
      in, out, header.tensors_offset, 4 + 10 * 4, GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR + h.ftype,
      [&](const quantize::TensorInfo& t) {
        auto it = types.find(t.name);
        if (it == types.end())
          throw Error(ErrorCode::kInvalidModel, "model file " + in.string() + ": unknown tensor " + t.name);
        // A quantised file's conv kernels are f16 (whisper.cpp's loader and earshot's read them so):
        // from an f32 file they are rounded to f16, the matrices quantised, the rest kept.
        return quantize::is_float(t.type) && it->second != GGML_TYPE_F32 ? it->second : t.type;
      },
      report);
}

quantize::FileSummary summarize_file(const std::filesystem::path& path) {
  const auto type = weight_type_of_ftype(read_file_header(path).hparams.ftype);
  return {"Whisper", "whisper.cpp ggml .bin", type ? std::string(type_name(*type)) : "-"};
}

}  // namespace earshot::whisper

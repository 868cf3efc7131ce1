#include "model/fastconformer/quantize.h"

#include <string>

#include "common/error.h"
#include "model/fastconformer/model.h"
#include "model/fastconformer/published_gguf.h"

namespace earshot::fastconformer {

namespace {

constexpr char kFamily[] = "FastConformer transducer";

// A matrix's target: the type when its rows are whole blocks, else its own type.
ggml_type target(const quantize::TensorInfo& t, ggml_type type, const std::string& label,
                 quantize::QuantizeReport& report) {
  if (!is_matrix_tensor(t.name) || t.n_dims != 2) return t.type;
  if (!quantize::is_float(t.type))
    throw Error(ErrorCode::kInvalidArgument, label + " is already quantised (tensor " + t.name + " is " +
                                                 ggml_type_name(t.type) + "): quantise from its f16 or f32 file");
  if (t.ne[0] % ggml_blck_size(type) != 0) {
    report.kept_partial_rows.push_back(t.name);
    return t.type;
  }
  return type;
}

}  // namespace

void quantize_file(const runtime::ModelFileProbe& probe, const std::filesystem::path& in,
                   const std::filesystem::path& out, ggml_type type, quantize::QuantizeReport& report) {
  const std::string label = "model file " + in.string();
  const auto choose = [&](const quantize::TensorInfo& t) { return target(t, type, label, report); };
  report.family = kFamily;
  if (probe.kind == runtime::ModelFileKind::kGgmlParakeet) {
    report.layout = "whisper.cpp Parakeet .bin";
    const uint64_t offset = legacy_tensors_offset(in);  // checks the header and the table
    // The header: magic, then six int32 hparams, ftype the last.
    quantize::rewrite_legacy_file(in, out, offset, 4 + 6 * 4,
                                  GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR + quantize::file_type_of(type), choose,
                                  report);
    return;
  }
  if (probe.architecture != kGgufArchitecture)
    throw Error(ErrorCode::kUnsupported, label + " is " + probe.description +
                                             ": earshot quantize writes earshot's layouts (whisper.cpp's Parakeet "
                                             ".bin, " +
                                             kGgufArchitecture +
                                             " GGUF); the project that publishes this layout publishes it quantised");
  report.layout = "earshot GGUF";
  quantize::rewrite_gguf_file(in, out, type, choose, report);
}

quantize::FileSummary summarize_file(const runtime::ModelFileProbe& probe, const std::filesystem::path& path) {
  quantize::FileSummary s;
  s.family = kFamily;
  if (probe.kind == runtime::ModelFileKind::kGgmlParakeet) {
    s.layout = "whisper.cpp Parakeet .bin";
    s.quantization = quantize::type_mix(quantize::legacy_tensor_bytes(
        path, legacy_tensors_offset(path), [](const quantize::TensorInfo& t) { return is_matrix_tensor(t.name); }));
    return s;
  }
  const bool ours = probe.architecture == kGgufArchitecture;
  // Another project's Parakeet layout: probe_model_file names it ("a transcribe.cpp Parakeet GGUF (...)").
  s.layout = ours ? "earshot GGUF" : probe.description.substr(2);
  s.quantization = quantize::gguf_matrix_types(path, ours ? is_matrix_tensor : is_published_matrix_tensor);
  return s;
}

}  // namespace earshot::fastconformer

#include "model/voxtral/quantize.h"

#include <gguf.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/voxtral/model.h"

namespace earshot::voxtral {

namespace {

bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};

}  // namespace

std::optional<Preset> preset_of_type(ggml_type type) {
  switch (type) {
    case GGML_TYPE_Q8_0: return Preset::kQ8_0;
    case GGML_TYPE_Q6_K: return Preset::kQ6_K;
    case GGML_TYPE_Q5_K: return Preset::kQ5_K_M;
    case GGML_TYPE_Q4_K: return Preset::kQ4_K_M;
    default: return std::nullopt;
  }
}

void quantize_file(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type,
                   quantize::QuantizeReport& report) {
  report.family = "Voxtral Realtime", report.layout = "transcribe.cpp GGUF";
  const std::optional<Preset> preset = preset_of_type(type);
  if (!preset)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("Voxtral Realtime files are quantised to transcribe.cpp's presets: q8_0 (Q8_0), q6_K "
                            "(Q6_K), q5_K (Q5_K_M), q4_K (Q4_K_M); not ") +
                    ggml_type_name(type));
  const std::string label = "model file " + in.string();
  const runtime::GgufFile file = runtime::GgufFile::open(in);
  if (file.architecture() != kGgufArchitecture)
    throw Error(ErrorCode::kInvalidModel, label + " is not a " + kGgufArchitecture + " GGUF");
  for (const runtime::GgufTensor& t : file.tensors())
    if (is_matrix_tensor(t.name) && !is_float_type(t.type))
      throw Error(ErrorCode::kInvalidArgument, label + " is already quantised (tensor " + t.name + " is " +
                                                   ggml_type_name(t.type) +
                                                   "): quantise from its BF16, F16 or F32 file");
  std::unique_ptr<gguf_context, GgufDeleter> keys(gguf_init_from_file(in.c_str(), {true, nullptr}));
  if (!keys) throw Error(ErrorCode::kInvalidModel, label + ": ggml cannot read it as GGUF");

  StreamingGgufWriter writer(out);
  gguf_set_kv(writer.meta(), keys.get());
  gguf_set_val_u32(writer.meta(), "general.file_type", preset_file_type(*preset));
  gguf_set_val_u32(writer.meta(), "general.quantization_version", GGML_QNT_VERSION);
  std::vector<ggml_type> targets;
  for (const runtime::GgufTensor& t : file.tensors()) {
    targets.push_back(is_float_type(t.type) ? tensor_type(*preset, t.name, t.ne[0]) : t.type);
    writer.declare(t.name, targets.back(), std::span<const int64_t>(t.ne.data(), static_cast<size_t>(t.n_dims)));
  }
  writer.begin_data();
  std::ifstream source(in, std::ios::binary);
  if (!source) throw Error(ErrorCode::kIo, "cannot open " + in.string());
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const runtime::GgufTensor& t = file.tensors()[i];
    std::vector<uint8_t> bytes(t.n_bytes);
    source.seekg(static_cast<std::streamoff>(t.offset));
    if (!source.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
      throw Error(ErrorCode::kInvalidModel, label + ": tensor " + t.name + " is truncated");
    report.bytes_in += bytes.size();
    if (targets[i] != t.type) {
      bytes = quantize::convert_rows(targets[i], t.type, bytes.data(), t.ne[0], t.ne[1] * t.ne[2] * t.ne[3]);
      if (ggml_is_quantized(targets[i])) ++report.n_quantized;
    }
    report.bytes_out += bytes.size();
    writer.write(bytes);
  }
  writer.finish();
}

}  // namespace earshot::voxtral

#include "model/voxtral/quantize.h"

#include <gguf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
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

// A tensor's values as floats (from F32, F16 or BF16 bytes).
std::vector<float> to_floats(ggml_type type, const std::vector<uint8_t>& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size() / ggml_type_size(type));
  std::vector<float> out(static_cast<size_t>(n));
  if (type == GGML_TYPE_F32)
    std::memcpy(out.data(), bytes.data(), bytes.size());
  else
    ggml_get_type_traits(type)->to_float(bytes.data(), out.data(), n);  // f16, bf16
  return out;
}

// encode_values with a quantised type's rows split over the machine's cores
// (rows quantise independently: the bytes are the same on any number of threads).
std::vector<uint8_t> encode_on_all_cores(ggml_type type, const std::vector<float>& values, int64_t ne0) {
  const int64_t rows = static_cast<int64_t>(values.size()) / ne0;
  const int64_t n = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, rows);
  if (!ggml_is_quantized(type) || n == 1) return encode_values(type, values, ne0);
  ggml_quantize_init(type);
  std::vector<uint8_t> out(ggml_row_size(type, ne0) * static_cast<size_t>(rows));
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t first = rows * i / n, end = rows * (i + 1) / n;
    threads.emplace_back([&, first, end] {
      ggml_quantize_chunk(type, values.data(), out.data(), first * ne0, end - first, ne0, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

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
      bytes = encode_on_all_cores(targets[i], to_floats(t.type, bytes), t.ne[0]);
      if (ggml_is_quantized(targets[i])) ++report.n_quantized;
    }
    report.bytes_out += bytes.size();
    writer.write(bytes);
  }
  writer.finish();
}

}  // namespace earshot::voxtral

// Loader for whisper.cpp's ggml VAD file format:
//   u32 magic 0x67676d6c ("ggml")
//   i32 type_len, type_len bytes model type ("silero-16k")
//   i32 version major, minor, patch
//   i32 n_window (512), n_context (64)
//   i32 n_encoder_layers, then per layer i32 in_channels, out_channels, kernel_size
//   i32 lstm_input_size, lstm_hidden_size, final_conv_in, final_conv_out
//   tensors until end of file: i32 n_dims (0 for a scalar), i32 name_len, i32 type (0 f32, 1 f16),
//     i32 ne[n_dims] (ggml order, fastest first), name bytes, raw little-endian data.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "common/error.h"
#include "model/runtime/device.h"
#include "model/runtime/model_file.h"
#include "model/runtime/weights.h"
#include "vad/model_impl.h"

namespace earshot::vad {
namespace {

constexpr int kTypeF32 = 0;
constexpr int kTypeF16 = 1;

struct TensorSpec {
  std::string name;
  int type;  // kTypeF32 / kTypeF16
  std::array<int64_t, 3> ne;
  ggml_tensor* VadModel::Impl::*slot = nullptr;  // null for the per-layer arrays
  int layer = -1;
  bool is_bias = false;
};

std::vector<TensorSpec> expected_tensors() {
  using I = VadModel::Impl;
  std::vector<TensorSpec> specs;
  specs.push_back({"_model.stft.forward_basis_buffer", kTypeF16, {kStftFilter, 1, kStftChannels}, &I::stft_basis});
  for (int i = 0; i < kEncoderLayers; ++i) {
    const std::string prefix = "_model.encoder." + std::to_string(i) + ".reparam_conv.";
    specs.push_back({prefix + "weight", kTypeF16, {kEncoderKernel, kEncoderIn[i], kEncoderOut[i]}, nullptr, i, false});
    specs.push_back({prefix + "bias", kTypeF32, {kEncoderOut[i], 1, 1}, nullptr, i, true});
  }
  specs.push_back({"_model.decoder.rnn.weight_ih", kTypeF32, {kLstmSize, 4 * kLstmSize, 1}, &I::lstm_ih_weight});
  specs.push_back({"_model.decoder.rnn.weight_hh", kTypeF32, {kLstmSize, 4 * kLstmSize, 1}, &I::lstm_hh_weight});
  specs.push_back({"_model.decoder.rnn.bias_ih", kTypeF32, {4 * kLstmSize, 1, 1}, &I::lstm_ih_bias});
  specs.push_back({"_model.decoder.rnn.bias_hh", kTypeF32, {4 * kLstmSize, 1, 1}, &I::lstm_hh_bias});
  specs.push_back({"_model.decoder.decoder.2.weight", kTypeF16, {kLstmSize, 1, 1}, &I::final_weight});
  specs.push_back({"_model.decoder.decoder.2.bias", kTypeF32, {1, 1, 1}, &I::final_bias});
  return specs;
}

const char* type_name(int type) { return type == kTypeF16 ? "f16" : type == kTypeF32 ? "f32" : "unknown"; }

std::string shape_string(const int64_t* ne, int n) {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < n; ++i) out << (i ? ", " : "") << ne[i];
  out << "]";
  return out.str();
}

// Header fields are read piecewise from the source (a file is never read whole);
// tensor data is only skipped here and placed by the runtime afterwards.
class Reader {
 public:
  Reader(const runtime::ByteSource& source, std::string_view name) : source_(source), name_(name) {}

  uint64_t remaining() const { return source_.size() - pos_; }
  uint64_t position() const { return pos_; }

  int32_t i32(const std::string& what) {
    int32_t value;
    take(&value, sizeof(value), what);
    return value;
  }
  void take(void* out, uint64_t n, const std::string& what) {
    if (remaining() < n) {
      fail("truncated at " + what + ": expected " + std::to_string(n) + " bytes, got " + std::to_string(remaining()));
    }
    source_.read(pos_, out, n);
    pos_ += n;
  }
  void skip(uint64_t n) { pos_ += n; }

  [[noreturn]] void fail(const std::string& message, ErrorCode code = ErrorCode::kInvalidModel) const {
    throw Error(code, "VAD model file " + name_ + ": " + message);
  }

 private:
  const runtime::ByteSource& source_;
  std::string name_;
  uint64_t pos_ = 0;
};

void expect_hparam(Reader& reader, const std::string& name, int32_t expected) {
  const int32_t value = reader.i32("header field " + name);
  if (value != expected) {
    reader.fail("unsupported " + name + " = " + std::to_string(value) + " (this Silero 16 kHz implementation needs " +
                    std::to_string(expected) + ")",
                ErrorCode::kUnsupported);
  }
}

}  // namespace

VadModel::Impl::~Impl() = default;

VadModel::VadModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VadModel::~VadModel() = default;
const std::string& VadModel::model_type() const { return impl_->model_type; }
const std::string& VadModel::version() const { return impl_->version; }

std::shared_ptr<const VadModel> VadModel::load(const std::filesystem::path& path) {
  std::error_code size_error;
  const auto size = std::filesystem::file_size(path, size_error);
  // Silero is ~0.9 MB; refuse to slurp a multi-GB file given by mistake.
  if (!size_error && size > (64u << 20)) {
    throw Error(ErrorCode::kInvalidModel, "VAD model file " + path.string() + ": " + std::to_string(size) +
                                              " bytes is far too large for a Silero VAD model (~0.9 MB)");
  }
  const runtime::ByteSource source = [&] {
    try {
      return runtime::ByteSource::file(path, "VAD model file");
    } catch (const Error& e) {
      throw Error(e.code(),
                  std::string(e.what()) + " (get it with whisper.cpp's models/download-vad-model.sh silero-v6.2.0)");
    }
  }();
  return load_from_source(source, path.string());
}

std::shared_ptr<const VadModel> VadModel::load_from_memory(std::span<const uint8_t> bytes,
                                                           std::string_view source_name) {
  return load_from_source(runtime::ByteSource::memory(bytes), source_name);
}

std::shared_ptr<const VadModel> VadModel::load_from_source(const runtime::ByteSource& source,
                                                           std::string_view source_name) {
  Reader reader(source, source_name);
  auto impl = std::make_unique<Impl>();

  uint32_t magic = 0;
  reader.take(&magic, sizeof(magic), "the magic number");
  if (magic != runtime::kGgmlMagic) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    reader.fail(std::string("bad magic ") + hex + " (expected 0x67676d6c 'ggml'): not a ggml VAD model");
  }
  const int32_t type_len = reader.i32("header field model_type length");
  if (type_len < 0 || type_len > 256) {
    // Whisper model files share the magic; their first field is the vocabulary size.
    reader.fail("bad model_type length " + std::to_string(type_len) +
                ": not a ggml VAD model (a Whisper model file has the same magic)");
  }
  impl->model_type.resize(static_cast<size_t>(type_len));
  reader.take(impl->model_type.data(), impl->model_type.size(), "header field model_type");
  const int32_t major = reader.i32("header field version major");
  const int32_t minor = reader.i32("header field version minor");
  const int32_t patch = reader.i32("header field version patch");
  impl->version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);

  expect_hparam(reader, "n_window", kWindowSamples);
  expect_hparam(reader, "n_context", kContextSamples);
  expect_hparam(reader, "n_encoder_layers", kEncoderLayers);
  for (int i = 0; i < kEncoderLayers; ++i) {
    const std::string layer = "encoder[" + std::to_string(i) + "].";
    expect_hparam(reader, layer + "in_channels", kEncoderIn[i]);
    expect_hparam(reader, layer + "out_channels", kEncoderOut[i]);
    expect_hparam(reader, layer + "kernel_size", kEncoderKernel);
  }
  expect_hparam(reader, "lstm_input_size", kLstmSize);
  expect_hparam(reader, "lstm_hidden_size", kLstmSize);
  expect_hparam(reader, "final_conv_in", kLstmSize);
  expect_hparam(reader, "final_conv_out", 1);

  // Validate the whole tensor table before allocating anything.
  const std::vector<TensorSpec> specs = expected_tensors();
  std::map<std::string, size_t> spec_index;
  for (size_t i = 0; i < specs.size(); ++i) spec_index[specs[i].name] = i;
  std::vector<uint64_t> data_offset(specs.size(), UINT64_MAX);
  std::string previous = "the header";
  while (reader.remaining() > 0) {
    const std::string where = "the tensor record after " + previous;
    const int32_t n_dims = reader.i32(where);
    const int32_t name_len = reader.i32(where);
    const int32_t type = reader.i32(where);
    if (n_dims < 0 || n_dims > 4)  // 0: a scalar (the final conv bias)
      reader.fail("bad n_dims " + std::to_string(n_dims) + " in " + where);
    if (name_len < 1 || name_len > 1024) reader.fail("bad name length " + std::to_string(name_len) + " in " + where);
    int64_t ne[4] = {1, 1, 1, 1};
    for (int d = 0; d < n_dims; ++d) {
      ne[d] = reader.i32(where);
      if (ne[d] < 1) reader.fail("bad dimension " + std::to_string(ne[d]) + " in " + where);
    }
    std::string name(static_cast<size_t>(name_len), '\0');
    reader.take(name.data(), name.size(), "the name of " + where);

    const auto found = spec_index.find(name);
    if (found == spec_index.end()) reader.fail("unknown tensor '" + name + "'");
    const TensorSpec& spec = specs[found->second];
    if (data_offset[found->second] != UINT64_MAX) reader.fail("tensor '" + name + "' appears twice");
    const int64_t expected_ne[4] = {spec.ne[0], spec.ne[1], spec.ne[2], 1};
    if (!std::equal(ne, ne + 4, expected_ne)) {
      reader.fail("tensor '" + name + "' has shape " + shape_string(ne, n_dims) + ", expected " +
                  shape_string(expected_ne, 3));
    }
    if (type != spec.type) {
      reader.fail("tensor '" + name + "' has type " + type_name(type) + " (" + std::to_string(type) + "), expected " +
                  type_name(spec.type));
    }
    const uint64_t n_bytes = static_cast<uint64_t>(ne[0] * ne[1] * ne[2] * ne[3]) * (type == kTypeF16 ? 2 : 4);
    if (reader.remaining() < n_bytes) {
      reader.fail("truncated at tensor " + name + ": expected " + std::to_string(n_bytes) + " bytes, got " +
                  std::to_string(reader.remaining()));
    }
    data_offset[found->second] = reader.position();
    reader.skip(n_bytes);
    previous = "tensor " + name;
  }
  std::string missing;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (data_offset[i] == UINT64_MAX) missing += (missing.empty() ? "" : ", ") + specs[i].name;
  }
  if (!missing.empty()) reader.fail("missing tensor(s): " + missing + " (file truncated or not a Silero VAD model)");

  // Silero always runs on the CPU (its window graph is far too small for a GPU to pay off).
  std::vector<runtime::TensorPlacement> placements;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ggml_type type = specs[i].type == kTypeF16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    placements.push_back(
        {{specs[i].name, type, 3, {specs[i].ne[0], specs[i].ne[1], specs[i].ne[2], 1}}, data_offset[i]});
  }
  impl->weights = runtime::ModelWeights::load(source, placements, runtime::cpu_device(),
                                              "VAD model file " + std::string(source_name));
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    ggml_tensor* t = impl->weights.tensor(i);
    if (spec.slot) {
      impl.get()->*spec.slot = t;
    } else if (spec.is_bias) {
      impl->encoder_bias[spec.layer] = t;
    } else {
      impl->encoder_weight[spec.layer] = t;
    }
  }
  return std::shared_ptr<const VadModel>(new VadModel(std::move(impl)));
}

}  // namespace earshot::vad

// Loading whisper.cpp's ggml VAD format: the real file, and precise errors for
// corrupt, truncated, incomplete or foreign files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tests/vad/test_util.h"
#include "vad/model_impl.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

// Header + tensor table byte offsets of the real file, as the format defines them:
// 4 magic + 4 + 10 "silero-16k" + 12 version + 8 window/context + 4 layers + 4*12 + 4*4.
constexpr size_t kHeaderBytes = 4 + 4 + 10 + 12 + 8 + 4 + 4 * 12 + 4 * 4;
// The first tensor record in the file: _model.encoder.0.reparam_conv.weight, 3 dims.
constexpr size_t kFirstTensorData = kHeaderBytes + 3 * 4 + 3 * 4 + 36;
constexpr size_t kFirstTensorBytes = 3 * 129 * 128 * 2;

const std::vector<uint8_t>& real_file() {
  static const auto bytes = test::read_bytes(test::shared_path("models/silero-v6.2.0-ggml.bin"));
  return bytes;
}

// The message of the earshot::Error that loading `bytes` throws, with its code.
std::pair<ErrorCode, std::string> load_error(const std::vector<uint8_t>& bytes) {
  try {
    VadModel::load_from_memory(bytes, "m.bin");
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kInternal, "loaded without error"};
}

// Builds model files tensor by tensor (the format's writer side).
class ModelFile {
 public:
  ModelFile() {
    put(0x67676d6c);
    put_string("silero-16k");
    for (int v : {6, 2, 0, 512, 64, 4}) put(v);
    for (int i = 0; i < kEncoderLayers; ++i) {
      put(kEncoderIn[i]);
      put(kEncoderOut[i]);
      put(kEncoderKernel);
    }
    for (int v : {128, 128, 128, 1}) put(v);
    EXPECT_EQ(bytes.size(), kHeaderBytes);
  }
  // A tensor record with `fill` as data (f32 or f16 zeros unless given).
  ModelFile& tensor(const std::string& name, std::vector<int32_t> ne, int type, size_t data_bytes = SIZE_MAX) {
    put(static_cast<int32_t>(ne.size()));
    put(static_cast<int32_t>(name.size()));
    put(type);
    size_t n = 1;
    for (int32_t d : ne) {
      put(d);
      n *= static_cast<size_t>(d);
    }
    bytes.insert(bytes.end(), name.begin(), name.end());
    bytes.resize(bytes.size() + (data_bytes == SIZE_MAX ? n * (type == 1 ? 2 : 4) : data_bytes), 0);
    return *this;
  }
  // Every tensor of the real layout, zero-filled, except those named in `skip`.
  ModelFile& all_tensors(const std::vector<std::string>& skip = {}) {
    auto add = [&](const std::string& name, std::vector<int32_t> ne, int type) {
      if (std::find(skip.begin(), skip.end(), name) == skip.end()) tensor(name, ne, type);
    };
    for (int i = 0; i < kEncoderLayers; ++i) {
      const std::string p = "_model.encoder." + std::to_string(i) + ".reparam_conv.";
      add(p + "weight", {kEncoderKernel, kEncoderIn[i], kEncoderOut[i]}, 1);
      add(p + "bias", {kEncoderOut[i]}, 0);
    }
    add("_model.decoder.rnn.weight_ih", {128, 512}, 0);
    add("_model.decoder.rnn.weight_hh", {128, 512}, 0);
    add("_model.decoder.rnn.bias_ih", {512}, 0);
    add("_model.decoder.rnn.bias_hh", {512}, 0);
    add("_model.decoder.decoder.2.weight", {128}, 1);
    add("_model.decoder.decoder.2.bias", {}, 0);
    add("_model.stft.forward_basis_buffer", {256, 1, 258}, 1);
    return *this;
  }
  void put(int32_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + 4);
  }
  void put_string(const std::string& s) {
    put(static_cast<int32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> bytes;
};

TEST(VadModel, LoadsTheRealSileroFile) {
  const auto model = test::silero();
  EXPECT_EQ(model->model_type(), "silero-16k");
  EXPECT_EQ(model->version(), "6.2.0");
  const VadModel::Impl& m = model->impl();
  EXPECT_EQ(m.stft_basis->type, GGML_TYPE_F16);
  EXPECT_EQ(m.stft_basis->ne[2], 258);
  EXPECT_EQ(m.lstm_ih_weight->ne[1], 512);
  // The bytes of the first tensor in the file land in the first encoder weight.
  std::vector<uint8_t> data(kFirstTensorBytes);
  ggml_backend_tensor_get(m.encoder_weight[0], data.data(), 0, data.size());
  EXPECT_EQ(std::memcmp(data.data(), real_file().data() + kFirstTensorData, data.size()), 0);
}

TEST(VadModel, AllZeroWeightsGiveSigmoidOfTheFinalBias) {
  // With zero weights every activation is 0, so p = sigmoid(final bias) = 0.5 for bias 0.
  ModelFile file;
  file.all_tensors();
  const auto model = VadModel::load_from_memory(file.bytes, "zeros.bin");
  VadSession session(model);
  const std::vector<float> noise(1024, 0.25f);
  EXPECT_EQ(session.push(noise), (std::vector<float>{0.5f, 0.5f}));
}

TEST(VadModel, MissingFileIsAnIoError) {
  try {
    VadModel::load("/nonexistent/silero.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("cannot open VAD model file /nonexistent/silero.bin"), std::string::npos);
  }
}

TEST(VadModel, WhisperModelFileIsNotAVadModel) {
  try {
    VadModel::load(test::shared_path("models/for-tests-ggml-tiny.bin"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find(
                  "for-tests-ggml-tiny.bin: bad model_type length 51865: not a ggml VAD model (a Whisper model file "
                  "has the same magic)"),
              std::string::npos)
        << e.what();
  }
}

TEST(VadModel, HugeFileIsRefusedWithoutReadingIt) {
  const auto path = std::filesystem::temp_directory_path() / ("earshot_vad_huge_" + std::to_string(::getpid()));
  { std::ofstream(path, std::ios::binary).put('g'); }
  std::filesystem::resize_file(path, 100u << 20);  // sparse: no disk used
  try {
    VadModel::load(path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_EQ(std::string(e.what()), "VAD model file " + path.string() +
                                         ": 104857600 bytes is far too large for a Silero VAD model (~0.9 MB)");
  }
  std::filesystem::remove(path);
}

TEST(VadModel, WrongMagic) {
  std::vector<uint8_t> bytes = real_file();
  std::memcpy(bytes.data(), "RIFF", 4);
  EXPECT_EQ(load_error(bytes),
            std::make_pair(ErrorCode::kInvalidModel, std::string("VAD model file m.bin: bad magic 0x46464952 (expected "
                                                                 "0x67676d6c 'ggml'): not a ggml VAD model")));
  EXPECT_EQ(load_error({}).second, "VAD model file m.bin: truncated at the magic number: expected 4 bytes, got 0");
}

TEST(VadModel, TruncatedHeaderNamesTheField) {
  const std::vector<uint8_t> bytes(real_file().begin(), real_file().begin() + 4 + 4 + 10 + 12 + 2);
  EXPECT_EQ(load_error(bytes),
            std::make_pair(ErrorCode::kInvalidModel, std::string("VAD model file m.bin: truncated at header field "
                                                                 "n_window: expected 4 bytes, got 2")));
}

TEST(VadModel, TruncatedTensorDataNamesTheTensor) {
  const std::vector<uint8_t> bytes(real_file().begin(), real_file().begin() + kFirstTensorData + 1000);
  EXPECT_EQ(
      load_error(bytes),
      std::make_pair(ErrorCode::kInvalidModel,
                     std::string("VAD model file m.bin: truncated at tensor _model.encoder.0.reparam_conv.weight: "
                                 "expected 99072 bytes, got 1000")));
}

TEST(VadModel, TruncatedTensorRecordNamesThePreviousTensor) {
  const size_t cut = kFirstTensorData + kFirstTensorBytes + 6;  // inside the next record's header
  const std::vector<uint8_t> bytes(real_file().begin(), real_file().begin() + cut);
  EXPECT_EQ(load_error(bytes).second,
            "VAD model file m.bin: truncated at the tensor record after tensor "
            "_model.encoder.0.reparam_conv.weight: expected 4 bytes, got 2");
}

TEST(VadModel, FileCutAtATensorBoundaryListsMissingTensors) {
  const std::vector<uint8_t> bytes(real_file().begin(), real_file().end() - (256 * 258 * 2 + 12 + 12 + 32));
  EXPECT_EQ(load_error(bytes).second,
            "VAD model file m.bin: missing tensor(s): _model.stft.forward_basis_buffer (file truncated or not a "
            "Silero VAD model)");
  ModelFile file;
  file.all_tensors({"_model.decoder.rnn.bias_hh", "_model.encoder.2.reparam_conv.bias"});
  EXPECT_EQ(load_error(file.bytes).second,
            "VAD model file m.bin: missing tensor(s): _model.encoder.2.reparam_conv.bias, _model.decoder.rnn.bias_hh "
            "(file truncated or not a Silero VAD model)");
}

TEST(VadModel, UnknownDuplicateMisshapenOrMistypedTensors) {
  ModelFile unknown;
  unknown.tensor("_model.encoder.9.weight", {3}, 0);
  EXPECT_EQ(load_error(unknown.bytes).second, "VAD model file m.bin: unknown tensor '_model.encoder.9.weight'");

  ModelFile duplicate;
  duplicate.tensor("_model.decoder.rnn.bias_ih", {512}, 0).tensor("_model.decoder.rnn.bias_ih", {512}, 0);
  EXPECT_EQ(load_error(duplicate.bytes).second,
            "VAD model file m.bin: tensor '_model.decoder.rnn.bias_ih' appears twice");

  ModelFile shape;
  shape.tensor("_model.decoder.rnn.weight_ih", {512, 128}, 0);
  EXPECT_EQ(load_error(shape.bytes).second,
            "VAD model file m.bin: tensor '_model.decoder.rnn.weight_ih' has shape [512, 128], expected [128, 512, 1]");

  ModelFile type;
  type.tensor("_model.encoder.1.reparam_conv.weight", {3, 128, 64}, 0);
  EXPECT_EQ(load_error(type.bytes).second,
            "VAD model file m.bin: tensor '_model.encoder.1.reparam_conv.weight' has type f32 (0), expected f16");

  ModelFile dims;
  dims.tensor("_model.decoder.rnn.bias_ih", {512, 1, 1, 1, 1}, 0);
  EXPECT_EQ(load_error(dims.bytes).second, "VAD model file m.bin: bad n_dims 5 in the tensor record after the header");
}

TEST(VadModel, ForeignHyperparametersAreUnsupported) {
  ModelFile file;  // the header of Silero's 8 kHz variant: 256-sample windows
  const int32_t window_8k = 256;
  std::memcpy(file.bytes.data() + 4 + 4 + 10 + 12, &window_8k, 4);
  EXPECT_EQ(load_error(file.bytes),
            std::make_pair(ErrorCode::kUnsupported,
                           std::string("VAD model file m.bin: unsupported n_window = 256 (this Silero 16 kHz "
                                       "implementation needs 512)")));
}

}  // namespace
}  // namespace earshot::vad

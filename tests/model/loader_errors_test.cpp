// Every kind of corrupt model file gets a precise earshot::Error, and a fuzz
// pass (truncations and byte flips of a small model) never crashes the loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/whisper/model.h"
#include "model_test_util.h"

namespace earshot::whisper {
namespace {

using testing::get_i32;
using testing::hparam_offset;
using testing::Record;
using testing::set_i32;
using testing::TempDir;

// Loads a file expected to be rejected; returns the message after checking the code.
std::string load_error(const std::filesystem::path& path, ErrorCode expected = ErrorCode::kInvalidModel) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "loading " << path << " succeeded";
  return "";
}

class CorruptModel : public ::testing::Test {
 protected:
  // One generated model for the whole suite; each test corrupts its own copies.
  static void SetUpTestSuite() {
    TempDir dir("corrupt-source");
    write_random_model(testing::small_spec(), dir / "good.bin");
    source_ = new std::vector<char>(testing::read_bytes(dir / "good.bin"));
  }
  static void TearDownTestSuite() {
    delete source_;
    source_ = nullptr;
  }
  void SetUp() override {
    good_ = *source_;
    testing::write_bytes(dir_ / "good.bin", good_);
    records_ = testing::parse_records(good_);
  }
  const Record& record(const std::string& name) const {
    for (const Record& r : records_) {
      if (r.name == name) return r;
    }
    throw std::runtime_error("no record " + name);
  }
  // Writes bytes as a model and returns the load error message.
  std::string error_of(const std::vector<char>& bytes, ErrorCode expected = ErrorCode::kInvalidModel) {
    const auto path = dir_ / ("case" + std::to_string(n_cases_++) + ".bin");
    testing::write_bytes(path, bytes);
    return load_error(path, expected);
  }
  std::string error_with_hparam(int index, int32_t value) {
    auto bytes = good_;
    set_i32(bytes, hparam_offset(index), value);
    return error_of(bytes);
  }
  static size_t vocabulary_offset() { return testing::kMelOffset + 8 + 80 * 201 * 4; }

  static inline std::vector<char>* source_ = nullptr;
  TempDir dir_{"corrupt"};
  std::vector<char> good_;
  std::vector<Record> records_;
  int n_cases_ = 0;
};

#define EXPECT_MESSAGE(message, fragment) EXPECT_NE((message).find(fragment), std::string::npos) << (message)

TEST_F(CorruptModel, TheUncorruptedFileLoads) { EXPECT_NO_THROW(Model::load(dir_ / "good.bin")); }

TEST_F(CorruptModel, MissingFileIsAnIoError) {
  EXPECT_MESSAGE(load_error(dir_ / "absent.bin", ErrorCode::kIo), "cannot open model file");
}

TEST_F(CorruptModel, EmptyFile) { EXPECT_MESSAGE(error_of({}), "file is 0 bytes, too small"); }

TEST_F(CorruptModel, BadMagic) {
  auto bytes = good_;
  set_i32(bytes, 0, 0x12345678);
  EXPECT_MESSAGE(error_of(bytes), "bad magic 0x12345678, expected 0x67676d6c ('ggml')");
  bytes[0] = 'G', bytes[1] = 'G', bytes[2] = 'U', bytes[3] = 'F';
  EXPECT_MESSAGE(error_of(bytes), "this is a GGUF file");
}

TEST_F(CorruptModel, BadMagicSaysWhatTheFileIs) {
  const std::string html = "<!DOCTYPE html>\n<html><body>Rate limited</body></html>";
  EXPECT_MESSAGE(error_of(std::vector<char>(html.begin(), html.end())),
                 "bad magic 0x4f44213c, expected 0x67676d6c ('ggml'); the file is an HTML page, not a model (a failed "
                 "or redirected download?)");
  std::vector<char> safetensors(64, ' ');
  set_i32(safetensors, 0, 40);
  set_i32(safetensors, 4, 0);
  safetensors[8] = '{';
  EXPECT_MESSAGE(error_of(safetensors), "; the file is a safetensors file (Hugging Face weights)");
  EXPECT_MESSAGE(load_error(testing::shared_dir() / "models" / "silero-v6.2.0-ggml.bin"),
                 "this is whisper.cpp's Silero VAD model file, not a Whisper model");
}

TEST_F(CorruptModel, TruncatedHeader) {
  const std::vector<char> bytes(good_.begin(), good_.begin() + 20);
  EXPECT_MESSAGE(error_of(bytes), "truncated at the hyper-parameters: expected 4 bytes, got 0");
}

TEST_F(CorruptModel, AbsurdHyperParameters) {
  EXPECT_MESSAGE(error_with_hparam(0, 5), "n_vocab = 5 is not a Whisper vocabulary size");
  EXPECT_MESSAGE(error_with_hparam(0, 60000), "n_vocab = 60000 is not a Whisper vocabulary size");
  EXPECT_MESSAGE(error_with_hparam(1, 2000000), "n_audio_ctx = 2000000 is outside the plausible range [1, 8192]");
  EXPECT_MESSAGE(error_with_hparam(2, -1), "n_audio_state = -1 is outside the plausible range");
  EXPECT_MESSAGE(error_with_hparam(2, 1 << 30), "n_audio_state = 1073741824 is outside the plausible range");
  EXPECT_MESSAGE(error_with_hparam(3, 5), "n_audio_head = 5 does not divide n_audio_state = 64");
  EXPECT_MESSAGE(error_with_hparam(4, 0), "n_audio_layer = 0 is outside the plausible range [1, 64]");
  EXPECT_MESSAGE(error_with_hparam(5, 0), "n_text_ctx = 0 is outside the plausible range");
  EXPECT_MESSAGE(error_with_hparam(6, 128), "n_audio_state = 64 differs from n_text_state = 128");
  EXPECT_MESSAGE(error_with_hparam(7, 0), "n_text_head = 0 is outside the plausible range [1, 64]");
  EXPECT_MESSAGE(error_with_hparam(8, 100000), "n_text_layer = 100000 is outside the plausible range [1, 64]");
  EXPECT_MESSAGE(error_with_hparam(9, 81), "n_mels = 81 (Whisper models use 80 or 128 mel bins)");
}

TEST_F(CorruptModel, UnsupportedWeightTypes) {
  EXPECT_MESSAGE(error_with_hparam(10, 5), "ftype = 5 is not a supported weight type");
  EXPECT_MESSAGE(error_with_hparam(10, -1), "ftype = -1 is not a supported weight type");
  EXPECT_MESSAGE(error_with_hparam(10, 1008), "quantisation version 1 of q5_0 weights is not supported");
  EXPECT_MESSAGE(error_with_hparam(10, 3001), "quantisation version 3 is unknown");
  // An f16 file claiming to be all-f32: the first matrix stored as f16 is named.
  EXPECT_MESSAGE(error_with_hparam(10, 0),
                 "tensor encoder.conv1.weight has type f16, expected f32 in a file of ftype 0");
}

TEST_F(CorruptModel, HeaderDisagreesWithTensorShapes) {
  EXPECT_MESSAGE(
      error_with_hparam(1, 25),
      "tensor encoder.positional_embedding has shape [64, 24], expected [64, 25] for the header's dimensions");
  EXPECT_MESSAGE(error_with_hparam(9, 128), "tensor encoder.conv1.weight has shape [3, 80, 64], expected [3, 128, 64]");
  EXPECT_MESSAGE(error_with_hparam(0, 51865),
                 "tensor decoder.token_embedding.weight has shape [64, 51864], expected [64, 51865]");
}

TEST_F(CorruptModel, AbsurdMelFilters) {
  auto bytes = good_;
  set_i32(bytes, testing::kMelOffset, 1 << 20);
  EXPECT_MESSAGE(error_of(bytes), "absurd mel filter dimensions 1048576 x 201");
  set_i32(bytes, testing::kMelOffset, 1000);
  set_i32(bytes, testing::kMelOffset + 4, 8000);
  EXPECT_MESSAGE(error_of(bytes), "truncated at the mel filters: expected 32000000 bytes, got");
}

TEST_F(CorruptModel, AbsurdVocabulary) {
  auto bytes = good_;
  set_i32(bytes, vocabulary_offset(), 60000);
  EXPECT_MESSAGE(error_of(bytes), "vocabulary holds 60000 tokens, expected 0..51864 (n_vocab)");
  set_i32(bytes, vocabulary_offset(), -1);
  EXPECT_MESSAGE(error_of(bytes), "vocabulary holds -1 tokens");
  bytes = good_;
  set_i32(bytes, vocabulary_offset() + 4, 0x7fffffff);
  EXPECT_MESSAGE(error_of(bytes), "vocabulary token 0 has length 2147483647 (expected 0..1024)");
  set_i32(bytes, vocabulary_offset() + 4, -5);
  EXPECT_MESSAGE(error_of(bytes), "vocabulary token 0 has length -5");
}

TEST_F(CorruptModel, TruncatedTensorData) {
  const Record& last = records_.back();
  ASSERT_EQ(last.name, "decoder.ln.bias");
  const std::vector<char> bytes(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(last.data_offset + 10));
  EXPECT_MESSAGE(error_of(bytes), "truncated at tensor decoder.ln.bias: expected 256 bytes, got 10");
  const Record& emb = record("decoder.token_embedding.weight");
  const std::vector<char> cut(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(emb.data_offset + 4096));
  EXPECT_MESSAGE(error_of(cut), "truncated at tensor decoder.token_embedding.weight: expected 6638592 bytes, got 4096");
}

TEST_F(CorruptModel, TruncatedRecordHeader) {
  const Record& last = records_.back();
  const std::vector<char> bytes(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(last.begin + 6));
  EXPECT_MESSAGE(error_of(bytes),
                 "truncated at the tensor record after tensor decoder.ln.weight: expected 4 bytes, got 2");
}

TEST_F(CorruptModel, NoTensorsAtAll) {
  EXPECT_MESSAGE(load_error(testing::template_path("tiny.en")), "holds no tensors (a vocabulary/mel template");
}

TEST_F(CorruptModel, MissingTensor) {
  const Record& r = record("decoder.blocks.1.cross_attn.key.weight");
  auto bytes = good_;
  bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(r.begin), bytes.begin() + static_cast<std::ptrdiff_t>(r.end));
  EXPECT_MESSAGE(error_of(bytes), "1 of 89 tensors are missing: decoder.blocks.1.cross_attn.key.weight");
}

TEST_F(CorruptModel, DuplicateTensor) {
  const Record& r = record("encoder.conv1.bias");
  auto bytes = good_;
  const std::vector<char> copy(good_.begin() + static_cast<std::ptrdiff_t>(r.begin),
                               good_.begin() + static_cast<std::ptrdiff_t>(r.end));
  bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(r.end), copy.begin(), copy.end());
  EXPECT_MESSAGE(error_of(bytes), "duplicate tensor encoder.conv1.bias");
}

TEST_F(CorruptModel, UnknownTensor) {
  const Record& r = record("decoder.ln.bias");
  auto bytes = good_;
  bytes[r.data_offset - 1] = 'z';
  EXPECT_MESSAGE(error_of(bytes), "unknown tensor 'decoder.ln.biaz' (after tensor decoder.ln.weight)");
}

TEST_F(CorruptModel, WrongShape) {
  const Record& r = record("decoder.blocks.1.mlp.0.weight");
  auto bytes = good_;
  set_i32(bytes, r.ne_offset, 65);
  EXPECT_MESSAGE(error_of(bytes), "tensor decoder.blocks.1.mlp.0.weight has shape [65, 256], expected [64, 256]");
}

TEST_F(CorruptModel, WrongType) {
  const Record& r = record("encoder.blocks.0.attn.query.weight");
  auto bytes = good_;
  set_i32(bytes, r.type_offset, GGML_TYPE_F32);
  EXPECT_MESSAGE(error_of(bytes),
                 "tensor encoder.blocks.0.attn.query.weight has type f32, expected f16 in a file of ftype 1");
  set_i32(bytes, r.type_offset, 99);
  EXPECT_MESSAGE(error_of(bytes), "tensor encoder.blocks.0.attn.query.weight has type unknown type 99, expected f16");
}

TEST_F(CorruptModel, AbsurdRecordFields) {
  const Record& r = record("encoder.conv2.weight");
  auto bytes = good_;
  set_i32(bytes, r.begin, 7);
  EXPECT_MESSAGE(error_of(bytes), "the tensor record after tensor encoder.conv1.bias has 7 dimensions (expected 1..4)");
  bytes = good_;
  set_i32(bytes, r.begin + 4, 1000000);
  EXPECT_MESSAGE(error_of(bytes), "has a name of length 1000000 (expected 1..256)");
}

// Deterministic fuzzing: truncations at many offsets and single-byte flips at many
// positions. Every outcome must be a loaded model or an earshot::Error.
TEST(LoaderFuzz, TruncationsAndByteFlipsNeverCrash) {
  TempDir dir("fuzz");
  // q4_0 at width 32 and a 300-token vocabulary keep the file small (~1 MB, mostly the token embedding).
  auto spec = testing::small_spec("tiny.en", GGML_TYPE_Q4_0, 99);
  spec.hparams.n_audio_state = spec.hparams.n_text_state = 32;
  spec.hparams.n_audio_layer = spec.hparams.n_text_layer = 1;
  const auto path = dir / "fuzz.bin";
  write_random_model(spec, path);
  const std::vector<char> good = testing::shrink_vocabulary(testing::read_bytes(path), 300);
  testing::write_bytes(path, good);
  ASSERT_EQ(Model::load(path)->vocabulary()[299], read_file_header(testing::template_path("tiny.en")).vocabulary[299]);
  const auto records = testing::parse_records(good);

  uint64_t state = 0x5eed;
  auto next = [&state]() {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  int loaded = 0, rejected = 0;
  auto try_load = [&](const std::string& what) {
    try {
      Model::load(path);
      ++loaded;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": non-earshot exception " << e.what();
    }
  };

  // Truncations, longest first, so that resize_file only ever shrinks the same file.
  std::vector<uint64_t> cuts;
  for (uint64_t i = 0; i < 64; ++i) cuts.push_back(i);
  for (const auto& r : records) {
    cuts.push_back(r.begin + 4);
    cuts.push_back(r.data_offset + 1);
  }
  for (int i = 0; i < 60; ++i) cuts.push_back(next() % good.size());
  std::sort(cuts.rbegin(), cuts.rend());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (uint64_t cut : cuts) {
    std::filesystem::resize_file(path, cut);
    try_load("truncation at " + std::to_string(cut));
  }
  EXPECT_EQ(loaded, 0) << "a truncated file loaded";

  // Byte flips: every header byte, the first bytes of each record, and random positions.
  testing::write_bytes(path, good);
  std::vector<uint64_t> positions;
  for (uint64_t i = 0; i < 60; ++i) positions.push_back(i);
  for (const auto& r : records) {
    for (uint64_t d : {0, 8}) positions.push_back(r.begin + d);
  }
  for (int i = 0; i < 80; ++i) positions.push_back(next() % good.size());
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  for (uint64_t pos : positions) {
    const char flipped = static_cast<char>(good[pos] ^ static_cast<char>(1 + next() % 255));
    file.seekp(static_cast<std::streamoff>(pos));
    file.write(&flipped, 1);
    file.flush();
    try_load("flip at " + std::to_string(pos));
    file.seekp(static_cast<std::streamoff>(pos));
    file.write(&good[pos], 1);
    file.flush();
  }
  // Flips inside tensor data are harmless; flips in the header are caught.
  EXPECT_GT(loaded, 0);
  EXPECT_GE(rejected, static_cast<int>(cuts.size()) + 56);  // magic, hparams, mel dimensions
}

}  // namespace
}  // namespace earshot::whisper

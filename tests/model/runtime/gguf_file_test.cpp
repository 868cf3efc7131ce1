// GgufWriter -> GgufFile round trips for every metadata type and several tensor
// types, and the precise error of every way a GGUF file can be wrong.
#include "model/runtime/gguf_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "gguf_test_util.h"
#include "model/runtime/weights.h"

namespace earshot::runtime {
namespace {

using testing::GgufLayout;
using testing::TempDir;

#define EXPECT_MESSAGE(message, fragment) EXPECT_NE((message).find(fragment), std::string::npos) << (message)

// The message of the kInvalidModel error opening `path` throws.
std::string open_error(const std::filesystem::path& path, ErrorCode code = ErrorCode::kInvalidModel) {
  try {
    GgufFile::open(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "opening " << path << " succeeded";
  return "";
}

template <typename F>
std::string error_message(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no earshot::Error thrown";
  return "";
}

TEST(GgufRoundTrip, EveryMetadataType) {
  TempDir dir("meta");
  GgufWriter writer;
  writer.set_architecture("toy");
  writer.set<uint8_t>("k.u8", 250);
  writer.set<int8_t>("k.i8", -100);
  writer.set<uint16_t>("k.u16", 65000);
  writer.set<int16_t>("k.i16", -32000);
  writer.set<uint32_t>("k.u32", 4000000000u);
  writer.set<int32_t>("k.i32", -2000000000);
  writer.set<uint64_t>("k.u64", 18000000000000000000ull);
  writer.set<int64_t>("k.i64", -9000000000000000000ll);
  writer.set<float>("k.f32", 0.15625f);
  writer.set<double>("k.f64", 1.0 / 3.0);
  writer.set<bool>("k.bool", true);
  writer.set("k.string", "héllo wörld");
  writer.set("k.empty_string", "");
  writer.set<uint32_t>("k.replaced", 1);
  writer.set<uint32_t>("k.replaced", 2);
  const std::vector<uint8_t> u8s = {0, 1, 255};
  const std::vector<int32_t> i32s = {-1, 0, 7, std::numeric_limits<int32_t>::min()};
  const std::vector<uint32_t> u32s = {3, 1, 4, 1, 5};
  const std::vector<float> f32s = {0.5f, -2.25f, 1e-30f};
  const std::vector<double> f64s = {1e300, -0.0};
  const std::vector<int64_t> i64s = {std::numeric_limits<int64_t>::max()};
  const std::vector<std::string> strings = {"a", "", "multi\nline", "ünï"};
  const std::vector<uint32_t> none;
  writer.set_array<uint8_t>("a.u8", u8s);
  writer.set_array<int32_t>("a.i32", i32s);
  writer.set_array<uint32_t>("a.u32", u32s);
  writer.set_array<float>("a.f32", f32s);
  writer.set_array<double>("a.f64", f64s);
  writer.set_array<int64_t>("a.i64", i64s);
  writer.set_array<std::string>("a.string", strings);
  writer.set_array<uint32_t>("a.empty", none);
  const bool bools[] = {true, false, true};
  writer.set_array<bool>("a.bool", bools);
  writer.write(dir / "meta.gguf");

  const GgufFile file = GgufFile::open(dir / "meta.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.architecture(), "toy");
  EXPECT_EQ(file.get<uint8_t>("k.u8"), 250);
  EXPECT_EQ(file.get<int8_t>("k.i8"), -100);
  EXPECT_EQ(file.get<uint16_t>("k.u16"), 65000);
  EXPECT_EQ(file.get<int16_t>("k.i16"), -32000);
  EXPECT_EQ(file.get_u32("k.u32"), 4000000000u);
  EXPECT_EQ(file.get<int32_t>("k.i32"), -2000000000);
  EXPECT_EQ(file.get<uint64_t>("k.u64"), 18000000000000000000ull);
  EXPECT_EQ(file.get<int64_t>("k.i64"), -9000000000000000000ll);
  EXPECT_EQ(file.get_f32("k.f32"), 0.15625f);
  EXPECT_EQ(file.get<double>("k.f64"), 1.0 / 3.0);
  EXPECT_EQ(file.get<bool>("k.bool"), true);
  EXPECT_EQ(file.get_string("k.string"), "héllo wörld");
  EXPECT_EQ(file.get_string("k.empty_string"), "");
  EXPECT_EQ(file.get_u32("k.replaced"), 2u);
  // A count: the u32 as an int, clamped so a corrupt one cannot wrap negative.
  EXPECT_EQ(file.get_count("k.replaced"), 2);
  EXPECT_EQ(file.get_count("k.u32"), GgufFile::kMaxCount);
  EXPECT_EQ(file.get_array<uint8_t>("a.u8"), u8s);
  EXPECT_EQ(file.get_array<int32_t>("a.i32"), i32s);
  EXPECT_EQ(file.get_array<uint32_t>("a.u32"), u32s);
  EXPECT_EQ(file.get_array<float>("a.f32"), f32s);
  EXPECT_EQ(file.get_array<double>("a.f64"), f64s);
  EXPECT_EQ(file.get_array<int64_t>("a.i64"), i64s);
  EXPECT_EQ(file.get_array<std::string>("a.string"), strings);
  EXPECT_TRUE(file.get_array<uint32_t>("a.empty").empty());
  EXPECT_EQ(file.get_array<bool>("a.bool"), (std::vector<bool>{true, false, true}));

  EXPECT_EQ(file.key_type("k.f64"), MetaType::kF64);
  EXPECT_EQ(file.key_type("a.string"), MetaType::kArray);
  EXPECT_EQ(file.key_type("absent"), std::nullopt);
  EXPECT_TRUE(file.has("k.bool"));
  EXPECT_FALSE(file.has("k.boo"));
  EXPECT_EQ(file.find_u32("absent"), std::nullopt);
  EXPECT_EQ(file.find_string("k.string"), "héllo wörld");
  EXPECT_EQ(file.find_array<float>("absent"), std::nullopt);
  EXPECT_EQ(file.keys().size(), 24u);  // 15 scalars (one set twice) with the architecture, 9 arrays
  EXPECT_TRUE(file.tensors().empty());
}

TEST(GgufRoundTrip, TensorsOfSeveralTypes) {
  TempDir dir("tensors");
  const std::vector<float> values = testing::random_values(64 * 4, 42);
  const int64_t ne[] = {64, 4};
  GgufWriter writer;
  writer.set_architecture("toy");
  for (ggml_type type :
       {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K}) {
    if (type == GGML_TYPE_Q4_K) {
      const std::vector<float> wide = testing::random_values(256 * 2, 43);  // k-quants take rows of 256
      const int64_t wide_ne[] = {256, 2};
      writer.add_tensor_f32("t.q4_k", type, wide_ne, wide);
    } else {
      writer.add_tensor_f32(std::string("t.") + ggml_type_name(type), type, ne, values);
    }
  }
  const std::vector<uint8_t> raw = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int64_t raw_ne[] = {3, 1, 2};
  writer.add_tensor("t.raw_i16", GGML_TYPE_I16, raw_ne, raw);
  EXPECT_EQ(writer.n_tensors(), 8u);
  writer.write(dir / "t.gguf");

  const GgufFile file = GgufFile::open(dir / "t.gguf");
  const std::vector<uint8_t> bytes = testing::read_bytes(dir / "t.gguf");
  ASSERT_EQ(file.tensors().size(), 8u);
  for (const GgufTensor& t : file.tensors()) {
    ASSERT_LE(t.offset + t.n_bytes, bytes.size()) << t.name;
    EXPECT_EQ(t.offset % file.alignment(), 0u) << t.name;
    if (t.name == "t.raw_i16") {
      EXPECT_EQ(t.type, GGML_TYPE_I16);
      EXPECT_EQ(t.n_dims, 3);
      EXPECT_EQ(t.ne, (std::array<int64_t, 4>{3, 1, 2, 1}));
      EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + t.offset, bytes.begin() + t.offset + t.n_bytes), raw);
      continue;
    }
    const bool wide = t.name == "t.q4_k";
    EXPECT_EQ(t.n_dims, 2) << t.name;
    EXPECT_EQ(t.ne, (std::array<int64_t, 4>{wide ? 256 : 64, wide ? 2 : 4, 1, 1})) << t.name;
    EXPECT_EQ(t.n_bytes, ggml_row_size(t.type, t.ne[0]) * t.ne[1]) << t.name;
    // Dequantised values are the written ones within the type's precision.
    const std::vector<float> expected = wide ? testing::random_values(512, 43) : values;
    std::vector<float> decoded(expected.size());
    if (t.type == GGML_TYPE_F32) {  // ggml has no f32 -> f32 conversion
      std::memcpy(decoded.data(), bytes.data() + t.offset, decoded.size() * sizeof(float));
    } else {
      ggml_get_type_traits(t.type)->to_float(bytes.data() + t.offset, decoded.data(),
                                             static_cast<int64_t>(decoded.size()));
    }
    const float tolerance = t.type == GGML_TYPE_F32    ? 0.0f
                            : t.type == GGML_TYPE_F16  ? 1e-3f
                            : t.type == GGML_TYPE_BF16 ? 1e-2f
                            : t.type == GGML_TYPE_Q8_0 ? 1e-2f
                                                       : 0.2f;
    float max_diff = 0.0f;
    for (size_t i = 0; i < expected.size(); ++i) max_diff = std::max(max_diff, std::fabs(decoded[i] - expected[i]));
    EXPECT_LE(max_diff, tolerance) << t.name;
  }
  EXPECT_EQ(file.find_tensor("t.q8_0")->type, GGML_TYPE_Q8_0);
  EXPECT_EQ(file.find_tensor("t.q8_1"), nullptr);
}

TEST(GgufRoundTrip, WriteIsAtomicAndReplaces) {
  TempDir dir("atomic");
  testing::write_toy_model(dir / "m.gguf", 1);
  const auto first = testing::read_bytes(dir / "m.gguf");
  testing::write_toy_model(dir / "m.gguf", 2);
  EXPECT_NE(testing::read_bytes(dir / "m.gguf"), first);
  size_t n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) n_files += entry.is_regular_file();
  EXPECT_EQ(n_files, 1u) << "a temporary file was left behind";
  GgufWriter writer;
  EXPECT_MESSAGE(error_message([&] { writer.write(dir / "no" / "such" / "dir.gguf"); }, ErrorCode::kIo),
                 "cannot write GGUF file " + (dir / "no" / "such" / "dir.gguf").string());
}

TEST(GgufWriterMisuse, IsAnErrorNotAnAbort) {
  GgufWriter writer;
  const int64_t ne[] = {32, 2};
  const std::vector<float> values(64, 0.5f);
  writer.add_tensor_f32("w", GGML_TYPE_Q8_0, ne, values);
  const auto misuse = [&](auto f) { return error_message(f, ErrorCode::kInvalidArgument); };
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor_f32("w", GGML_TYPE_F32, ne, values); }), "duplicate GGUF tensor w");
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor_f32(std::string(64, 'n'), GGML_TYPE_F32, ne, values); }),
                 "must have 1..63 bytes");
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor_f32("v", GGML_TYPE_F32, ne, std::vector<float>(63)); }),
                 "tensor v: 63 values for 64 elements");
  const std::vector<uint8_t> bytes(10);
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor("v", GGML_TYPE_F16, ne, bytes); }),
                 "tensor v: 10 bytes of data, its shape and type f16 take 128");
  const int64_t odd[] = {30, 2};
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor_f32("v", GGML_TYPE_Q4_0, odd, std::vector<float>(60)); }),
                 "rows of 30 elements are not a multiple of q4_0's block size 32");
  EXPECT_MESSAGE(misuse([&] { writer.add_tensor_f32("v", GGML_TYPE_IQ2_XXS, ne, values); }),
                 "cannot convert floats to iq2_xxs");
  EXPECT_MESSAGE(misuse([&] { writer.set<uint32_t>("general.alignment", 64); }), "default alignment");
  EXPECT_MESSAGE(misuse([&] { writer.set<uint32_t>("", 1); }), "keys cannot be empty");
  EXPECT_EQ(writer.n_tensors(), 1u);
}

class CorruptGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_toy_model(dir_ / "good.gguf");
    good_ = testing::read_bytes(dir_ / "good.gguf");
    layout_ = testing::walk_gguf(good_);
  }
  std::filesystem::path write(const std::vector<uint8_t>& bytes) {
    const auto path = dir_ / ("case" + std::to_string(n_++) + ".gguf");
    testing::write_bytes(path, bytes);
    return path;
  }
  std::string error_of(const std::vector<uint8_t>& bytes) { return open_error(write(bytes)); }
  const GgufLayout::Info& info(const std::string& name) const {
    for (const auto& i : layout_.infos) {
      if (i.name == name) return i;
    }
    throw std::runtime_error("no tensor " + name);
  }
  const GgufLayout::Kv& kv(const std::string& key) const {
    for (const auto& k : layout_.kvs) {
      if (k.key == key) return k;
    }
    throw std::runtime_error("no key " + key);
  }

  TempDir dir_{"corrupt"};
  std::vector<uint8_t> good_;
  GgufLayout layout_;
  int n_ = 0;
};

TEST_F(CorruptGguf, TheGoodFileOpens) {
  const GgufFile file = GgufFile::open(dir_ / "good.gguf");
  EXPECT_EQ(file.architecture(), "toy");
  EXPECT_EQ(file.get_u32("toy.block_count"), 2u);
  ASSERT_EQ(file.tensors().size(), layout_.infos.size());
  for (size_t i = 0; i < layout_.infos.size(); ++i) {
    EXPECT_EQ(file.tensors()[i].name, layout_.infos[i].name);
    EXPECT_EQ(file.tensors()[i].offset, layout_.infos[i].data);
    EXPECT_EQ(file.tensors()[i].n_bytes, layout_.infos[i].n_bytes);
  }
}

TEST_F(CorruptGguf, MissingFileIsAnIoError) {
  EXPECT_MESSAGE(open_error(dir_ / "absent.gguf", ErrorCode::kIo), "cannot open model file");
}

TEST_F(CorruptGguf, NotAGgufFileSaysWhatItIs) {
  EXPECT_MESSAGE(error_of({}), "not a GGUF file: an empty file");
  std::vector<uint8_t> ggml = good_;
  testing::put<uint32_t>(ggml, 0, 0x67676d6c);
  testing::put<uint32_t>(ggml, 4, 51864);
  EXPECT_MESSAGE(error_of(ggml), "not a GGUF file: a legacy ggml Whisper model");
  const std::string html = "<!DOCTYPE html><html><body>404</body></html>";
  EXPECT_MESSAGE(error_of(std::vector<uint8_t>(html.begin(), html.end())), "an HTML page, not a model");
  std::vector<uint8_t> safetensors(64, ' ');
  testing::put<uint64_t>(safetensors, 0, 40);
  safetensors[8] = '{';
  EXPECT_MESSAGE(error_of(safetensors), "a safetensors file");
  std::vector<uint8_t> tar(1024, 0);
  std::memcpy(tar.data() + 257, "ustar", 5);
  EXPECT_MESSAGE(error_of(tar), "a tar archive (a NeMo .nemo checkpoint is one)");
  EXPECT_MESSAGE(error_of({'G', 'G', 'U'}), "not a GGUF file");
}

TEST_F(CorruptGguf, Versions) {
  auto bytes = good_;
  testing::put<uint32_t>(bytes, GgufLayout::kVersionField, 1);
  EXPECT_MESSAGE(error_of(bytes), "GGUF version 1 is not supported (this build reads versions 2 to 3; re-convert");
  testing::put<uint32_t>(bytes, GgufLayout::kVersionField, 4);
  EXPECT_MESSAGE(error_of(bytes), "GGUF version 4 is not supported (this build reads versions 2 to 3; a newer earshot");
  testing::put<uint32_t>(bytes, GgufLayout::kVersionField, 0x03000000);
  EXPECT_MESSAGE(error_of(bytes), "the other byte order");
  testing::put<uint32_t>(bytes, GgufLayout::kVersionField, 2);  // v2 has v3's layout
  EXPECT_EQ(GgufFile::open(write(bytes)).version(), 2u);
}

TEST_F(CorruptGguf, TruncatedAtEachTensor) {
  for (const auto& t : layout_.infos) {
    for (uint64_t kept : {uint64_t{0}, uint64_t{1}, t.n_bytes - 1}) {
      const std::vector<uint8_t> cut(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(t.data + kept));
      EXPECT_MESSAGE(error_of(cut), "truncated at tensor " + t.name + ": expected " + std::to_string(t.n_bytes) +
                                        " bytes, got " + std::to_string(kept));
    }
  }
}

TEST_F(CorruptGguf, TruncatedMetadata) {
  const auto& tokens = kv("tokenizer.ggml.tokens");
  const std::vector<uint8_t> cut(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(tokens.value + 20));
  EXPECT_MESSAGE(error_of(cut), "truncated at the value of key 'tokenizer.ggml.tokens'");
  const auto& first = layout_.infos.front();
  const std::vector<uint8_t> in_info(good_.begin(), good_.begin() + static_cast<std::ptrdiff_t>(first.ne + 3));
  EXPECT_MESSAGE(error_of(in_info), "truncated at the shape of tensor token_embd.weight: expected 8 bytes, got 3");
  auto bytes = good_;
  testing::put<int64_t>(bytes, GgufLayout::kNKvField, 1000000);
  EXPECT_MESSAGE(error_of(bytes), "claims 1000000 metadata keys");
}

TEST_F(CorruptGguf, UnknownTypes) {
  auto bytes = good_;
  testing::put<int32_t>(bytes, info("blk.0.attn_q.weight").type, 99);
  EXPECT_MESSAGE(error_of(bytes), "tensor blk.0.attn_q.weight has unknown ggml type 99");
  bytes = good_;
  testing::put<int32_t>(bytes, info("blk.0.attn_q.weight").type, 4);  // Q4_2, removed from ggml
  EXPECT_MESSAGE(error_of(bytes), "tensor blk.0.attn_q.weight has unknown ggml type 4");
  bytes = good_;
  testing::put<int32_t>(bytes, kv("toy.block_count").type, 13);
  EXPECT_MESSAGE(error_of(bytes), "key 'toy.block_count' has unknown value type 13");
  bytes = good_;
  testing::put<int32_t>(bytes, kv("tokenizer.ggml.tokens").value, 9);
  EXPECT_MESSAGE(error_of(bytes), "key 'tokenizer.ggml.tokens' is an array of arrays");
}

TEST_F(CorruptGguf, InconsistentTables) {
  auto bytes = good_;
  // The f32 conv tensor stored as f16 changes its size: the next tensor's offset no longer follows.
  testing::put<int32_t>(bytes, info("blk.1.conv.weight").type, GGML_TYPE_F16);
  EXPECT_MESSAGE(error_of(bytes), "tensor output.bias has data offset");
  bytes = good_;
  testing::put<uint32_t>(bytes, info("output.bias").n_dims, 5);
  EXPECT_MESSAGE(error_of(bytes), "tensor output.bias has 5 dimensions (at most 4)");
  bytes = good_;
  testing::put<int64_t>(bytes, info("blk.0.attn_q.weight").ne, 48);
  EXPECT_MESSAGE(error_of(bytes), "has rows of 48 elements, not a multiple of its block size 32");
}

TEST_F(CorruptGguf, MissingAndMistypedKeysNameKeyFileAndArchitecture) {
  const GgufFile file = GgufFile::open(dir_ / "good.gguf");
  const std::string where = "model file " + (dir_ / "good.gguf").string() + " (architecture 'toy'): ";
  EXPECT_EQ(error_message([&] { file.get_u32("toy.context_length"); }, ErrorCode::kInvalidModel),
            where + "required key 'toy.context_length' is missing");
  EXPECT_EQ(error_message([&] { file.get_count("toy.context_length"); }, ErrorCode::kInvalidModel),
            where + "required key 'toy.context_length' is missing");
  EXPECT_EQ(error_message([&] { file.get_count("general.name"); }, ErrorCode::kInvalidModel),
            where + "key 'general.name' is a string, expected a u32");
  EXPECT_EQ(error_message([&] { file.get<int32_t>("toy.block_count"); }, ErrorCode::kInvalidModel),
            where + "key 'toy.block_count' is a u32, expected an i32");
  EXPECT_EQ(error_message([&] { file.find_string("toy.embedding_length"); }, ErrorCode::kInvalidModel),
            where + "key 'toy.embedding_length' is a u32, expected a string");
  EXPECT_EQ(error_message([&] { file.get_array<std::string>("general.name"); }, ErrorCode::kInvalidModel),
            where + "key 'general.name' is a string, expected an array of string");
  EXPECT_EQ(error_message([&] { file.get_array<uint32_t>("tokenizer.ggml.tokens"); }, ErrorCode::kInvalidModel),
            where + "key 'tokenizer.ggml.tokens' is an array of string, expected an array of u32");
  EXPECT_EQ(error_message([&] { file.get_string("tokenizer.ggml.tokens"); }, ErrorCode::kInvalidModel),
            where + "key 'tokenizer.ggml.tokens' is an array of string, expected a string");

  TempDir dir("no-arch");
  GgufWriter writer;
  writer.set<uint32_t>("x", 1);
  writer.write(dir / "x.gguf");
  const GgufFile bare = GgufFile::open(dir / "x.gguf");
  EXPECT_EQ(bare.architecture(), "");
  EXPECT_MESSAGE(error_message([&] { bare.get_string("general.architecture"); }, ErrorCode::kInvalidModel),
                 "(no general.architecture): required key 'general.architecture' is missing");
}

TEST_F(CorruptGguf, DuplicatesAndEmptyKeys) {
  auto bytes = good_;
  // Renames of equal length: "toy.embedding_length" -> "general.architecture", "blk.1.ffn_up.weight" ->
  // "blk.0.attn_q.weight".
  std::memcpy(bytes.data() + kv("toy.embedding_length").begin + 8, "general.architecture", 20);
  EXPECT_MESSAGE(error_of(bytes), "duplicate metadata key 'general.architecture'");
  bytes = good_;
  std::memcpy(bytes.data() + info("blk.1.ffn_up.weight").begin + 8, "blk.0.attn_q.weight", 19);
  EXPECT_MESSAGE(error_of(bytes), "duplicate tensor blk.0.attn_q.weight");
  bytes = good_;
  testing::put<uint64_t>(bytes, kv("toy.block_count").begin, 0);
  EXPECT_MESSAGE(error_of(bytes), "metadata key 1 (after key 'general.architecture') is empty");
}

// Deterministic fuzzing of a small GGUF: truncations everywhere in the metadata
// and at every tensor, byte flips in the header and the tables. Every outcome is
// an opened file whose weights load or an earshot::Error; a truncated file never opens.
TEST(GgufFuzz, TruncationsAndByteFlipsNeverCrash) {
  TempDir dir("fuzz");
  const auto path = dir / "fuzz.gguf";
  testing::write_toy_model(path);
  const std::vector<uint8_t> good = testing::read_bytes(path);
  const GgufLayout layout = testing::walk_gguf(good);
  const uint64_t data_end = layout.infos.back().data + layout.infos.back().n_bytes;

  uint64_t state = 0x6767;
  auto next = [&state]() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  int opened = 0, rejected = 0, loaded = 0;
  auto try_open = [&](const std::string& what) {
    try {
      const GgufFile file = GgufFile::open(path);
      for (const GgufTensor& t : file.tensors()) EXPECT_LE(t.offset + t.n_bytes, file.file_size()) << what;
      file.find_string("general.architecture");  // may throw a typed error when the type was flipped
      ++opened;
      // The weights of an opened file load, or fail with a typed error (a flipped name or shape).
      const auto placements = place_gguf_tensors(file, testing::toy_tensors());
      ModelWeights::load(ByteSource::file(path), placements, nullptr, file.label());
      ++loaded;
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kInvalidModel || e.code() == ErrorCode::kIo) << what << ": " << e.what();
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": non-earshot exception " << e.what();
    }
  };

  std::vector<uint64_t> cuts;
  for (uint64_t i = 0; i < layout.data_offset; ++i) cuts.push_back(i);  // every metadata byte
  for (const auto& t : layout.infos) {
    cuts.push_back(t.data);
    cuts.push_back(t.data + t.n_bytes - 1);
  }
  for (int i = 0; i < 40; ++i) cuts.push_back(next() % data_end);
  std::sort(cuts.rbegin(), cuts.rend());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  int truncations_opened = 0;
  for (uint64_t cut : cuts) {
    std::filesystem::resize_file(path, cut);
    const int before = opened;
    try_open("truncation at " + std::to_string(cut));
    truncations_opened += opened - before;
  }
  EXPECT_EQ(truncations_opened, 0) << "a truncated file opened";

  testing::write_bytes(path, good);
  std::vector<uint64_t> positions;
  for (uint64_t i = 0; i < layout.data_offset; ++i) positions.push_back(i);  // every metadata byte
  for (int i = 0; i < 40; ++i) positions.push_back(layout.data_offset + next() % (good.size() - layout.data_offset));
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  for (uint64_t pos : positions) {
    for (int flip = 0; flip < 2; ++flip) {
      const char flipped = static_cast<char>(good[pos] ^ static_cast<uint8_t>(1 + next() % 255));
      file.seekp(static_cast<std::streamoff>(pos));
      file.write(&flipped, 1);
      file.flush();
      try_open("flip at " + std::to_string(pos));
      file.seekp(static_cast<std::streamoff>(pos));
      file.write(reinterpret_cast<const char*>(&good[pos]), 1);
      file.flush();
    }
  }
  // Flips in tensor data and string contents are harmless; magic and version flips at least are caught.
  EXPECT_GT(loaded, 0);
  EXPECT_GE(rejected, static_cast<int>(cuts.size()) + 8);
}

}  // namespace
}  // namespace earshot::runtime

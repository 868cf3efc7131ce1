// probe_model_file: what a file is from its first bytes, for engine::load.
#include "model/runtime/model_file.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "gguf_test_util.h"

namespace earshot::runtime {
namespace {

using testing::TempDir;

std::filesystem::path shared_model(const std::string& name) {
  return std::filesystem::path(EARSHOT_SHARED_DIR) / "models" / name;
}

class Probe : public ::testing::Test {
 protected:
  ModelFileProbe probe_bytes(const std::vector<uint8_t>& bytes) {
    const auto path = dir_ / ("f" + std::to_string(n_++));
    testing::write_bytes(path, bytes);
    return probe_model_file(path);
  }
  ModelFileProbe probe_text(const std::string& text) { return probe_bytes({text.begin(), text.end()}); }

  TempDir dir_{"probe"};
  int n_ = 0;
};

TEST_F(Probe, LegacyGgmlWhisperAndVad) {
  const ModelFileProbe whisper = probe_model_file(shared_model("for-tests-ggml-tiny.en.bin"));
  EXPECT_EQ(whisper.kind, ModelFileKind::kGgmlWhisper);
  EXPECT_EQ(whisper.description, "a legacy ggml Whisper model (whisper.cpp's .bin format)");
  EXPECT_EQ(whisper.architecture, "");
  const ModelFileProbe vad = probe_model_file(shared_model("silero-v6.2.0-ggml.bin"));
  EXPECT_EQ(vad.kind, ModelFileKind::kGgmlVad);
  EXPECT_EQ(vad.description, "a legacy ggml VAD model (whisper.cpp's Silero format)");
}

TEST_F(Probe, GgufWithAndWithoutArchitecture) {
  testing::write_toy_model(dir_ / "toy.gguf");
  const ModelFileProbe toy = probe_model_file(dir_ / "toy.gguf");
  EXPECT_EQ(toy.kind, ModelFileKind::kGguf);
  EXPECT_EQ(toy.architecture, "toy");
  EXPECT_EQ(toy.description, "a GGUF file of architecture 'toy'");
  GgufWriter writer;
  writer.set<uint32_t>("x", 1);
  writer.write(dir_ / "bare.gguf");
  const ModelFileProbe bare = probe_model_file(dir_ / "bare.gguf");
  EXPECT_EQ(bare.kind, ModelFileKind::kGguf);
  EXPECT_EQ(bare.architecture, "");
  EXPECT_EQ(bare.description, "a GGUF file without general.architecture");
  // A broken GGUF is the reader's precise error, not a guess.
  auto bytes = testing::read_bytes(dir_ / "toy.gguf");
  bytes.resize(bytes.size() - 100);
  try {
    probe_bytes(bytes);
    ADD_FAILURE() << "a truncated GGUF probed fine";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("truncated at tensor blk.1.conv.weight: expected 384 bytes, got 348"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Probe, EverythingElseIsNamed) {
  const auto other = [&](const ModelFileProbe& p) {
    EXPECT_EQ(p.kind, ModelFileKind::kOther) << p.description;
    return p.description;
  };
  EXPECT_EQ(other(probe_bytes({})), "an empty file");
  EXPECT_EQ(other(probe_text("\xEF\xBB\xBF  <!doctype HTML>\n<html>")),
            "an HTML page, not a model (a failed or redirected download?)");
  EXPECT_EQ(other(probe_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")),
            "a Git LFS pointer, not the model itself (fetch it with git lfs pull)");
  EXPECT_EQ(other(probe_text("Not Found")), "a text file starting with 'Not Found'");
  EXPECT_EQ(other(probe_text("{\"error\": \"rate limited\"}")),
            "a JSON/text file starting with '{\"error\": \"rate limited\"}'");
  std::vector<uint8_t> safetensors(100, ' ');
  testing::put<uint64_t>(safetensors, 0, 80);
  safetensors[8] = '{';
  EXPECT_EQ(other(probe_bytes(safetensors)), "a safetensors file (Hugging Face weights): convert it to GGUF");
  std::vector<uint8_t> tar(2048, 0);
  std::memcpy(tar.data() + 257,
              "ustar\0"
              "00",
              8);
  EXPECT_EQ(other(probe_bytes(tar)), "a tar archive (a NeMo .nemo checkpoint is one): convert the model to GGUF");
  EXPECT_EQ(other(probe_bytes({0x1f, 0x8b, 8, 0, 0, 0})), "a gzip-compressed file: unpack it first");
  EXPECT_EQ(other(probe_bytes({'P', 'K', 3, 4, 0, 0})), "a zip archive (a PyTorch .pt checkpoint is one): convert it");
  EXPECT_EQ(other(probe_bytes({0x80, 0x02, 'c', 0})), "a Python pickle (an old PyTorch checkpoint): convert it");
  EXPECT_EQ(other(probe_bytes({'t', 'j', 'g', 'g', 1, 0, 0, 0})),
            "a legacy llama.cpp ggml file (magic 0x67676a74), older than GGUF: re-convert the model");
  EXPECT_EQ(other(probe_bytes({0x12, 0x34, 0x00, 0xff, 0x01})), "unrecognised binary data starting 12 34 00 ff 01");
  EXPECT_THROW(probe_model_file(dir_ / "absent.bin"), Error);
  EXPECT_THROW(probe_model_file(dir_.path()), Error);
  // From bytes alone: a GGUF header is enough to say GGUF, however broken the rest.
  EXPECT_EQ(classify_file_start(std::vector<uint8_t>{'G', 'G', 'U', 'F'}), ModelFileKind::kGguf);
  EXPECT_EQ(classify_file_start(std::vector<uint8_t>{'l', 'm', 'g', 'g', 0x18, 0xcb, 0, 0}),
            ModelFileKind::kGgmlWhisper);
  EXPECT_EQ(classify_file_start(std::vector<uint8_t>{'l', 'm', 'g', 'g'}), ModelFileKind::kOther);
}

}  // namespace
}  // namespace earshot::runtime

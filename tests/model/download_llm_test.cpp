// `earshot pull` for the translation LLMs (GGUF): the same resumable, verified
// download as the Whisper models, against the in-process loopback server.
#include <gtest/gtest.h>

#include "common/error.h"
#include "error_of.h"
#include "model/download.h"
#include "model/registry.h"
#include "model/runtime/gguf_file.h"
#include "pull_fixture.h"
#include "stages/translation/options.h"

namespace earshot::models {
namespace {

using earshot::testing::error_of;
using earshot::testing::read_file;

class LlmDownloadTest : public earshot::testing::PullFixture {
 protected:
  void SetUp() override {
    make_cache("earshot-llm-download-test-");
    std::filesystem::create_directories(cache_);
    // A small but complete GGUF (metadata, one tensor): what the GGUF check reads.
    runtime::GgufWriter w;
    w.set_architecture("hunyuan-dense");
    w.set("hunyuan-dense.block_count", uint32_t{2});
    const std::vector<float> values(64 * 1024, 0.25f);
    const int64_t ne[2] = {1024, 64};
    w.add_tensor_f32("token_embd.weight", GGML_TYPE_F32, ne, values);
    const std::filesystem::path file = cache_ / "source.gguf";
    w.write(file);
    content_ = read_file(file);
    std::filesystem::remove(file);
    ASSERT_GT(content_.size(), 200000u);
    const ModelInfo* known = find_model(catalogue_, "hy-mt2-1.8b-q8_0");
    ASSERT_NE(known, nullptr);
    model_ = *known;
    server_.serve("/models/" + model_.file, content_);
  }
  std::filesystem::path cached() const { return cache_ / model_.file; }
  std::filesystem::path part() const { return cache_ / (model_.file + ".part"); }

  const std::vector<ModelInfo> catalogue_ = stages::translation::translation_catalogue();
  ModelInfo model_;
};

TEST_F(LlmDownloadTest, PullLandsWhereTranslationModelNameFindsIt) {
  const Error before = error_of([&] { resolve_translation_model(model_.name, catalogue_, cache_); });
  EXPECT_EQ(before.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(before.what()).find("earshot pull " + model_.name), std::string::npos) << before.what();

  uint64_t last_done = 0;
  PullOptions o = options();
  o.progress = [&](uint64_t done, std::optional<uint64_t>) { last_done = done; };
  EXPECT_EQ(pull_model(model_, o), cached());
  EXPECT_EQ(read_file(cached()), content_);
  EXPECT_EQ(last_done, content_.size());
  EXPECT_FALSE(std::filesystem::exists(part()));
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/models/" + model_.file);
  // By its name and by its file name, as --translation-model takes them.
  EXPECT_EQ(resolve_translation_model(model_.name, catalogue_, cache_), cached());
  EXPECT_EQ(resolve_translation_model(model_.file, catalogue_, cache_), cached());
}

TEST_F(LlmDownloadTest, DroppedConnectionIsResumedWithARangeRequest) {
  server_.drop_after(100000, 1);
  EXPECT_EQ(pull_model(model_, options()), cached());
  EXPECT_EQ(read_file(cached()), content_);
  const auto seen = server_.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].range, "bytes=100000-");
}

TEST_F(LlmDownloadTest, AnHtmlPageFailsTheGgufCheckAndLeavesNothing) {
  server_.serve("/models/" + model_.file,
                "<!DOCTYPE html><html><body>Access to this model is restricted</body></html>");
  const Error e = error_of([&] { pull_model(model_, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("HTML"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
  EXPECT_FALSE(std::filesystem::exists(part()));
}

TEST_F(LlmDownloadTest, AGgufWithoutArchitectureIsRefused) {
  runtime::GgufWriter w;
  w.set("general.name", "not an llm");
  w.write(cache_ / "plain.gguf");
  server_.serve("/models/" + model_.file, read_file(cache_ / "plain.gguf"));
  const Error e = error_of([&] { pull_model(model_, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
}

TEST_F(LlmDownloadTest, AKnownSha1IsChecked) {
  const std::filesystem::path good = cache_ / "good.gguf";
  std::ofstream(good, std::ios::binary) << content_;
  model_.sha1 = sha1_of_file(good);
  server_.corrupt_byte_at(150000);  // inside the tensor data: the GGUF check alone would pass it
  const Error e = error_of([&] { pull_model(model_, options()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(e.what()).find("expected " + model_.sha1), std::string::npos) << e.what();
  EXPECT_FALSE(std::filesystem::exists(cached()));
}

TEST(TranslationModelResolution, PathsUnknownNamesAndDirectories) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::vector<ModelInfo> catalogue = stages::translation::translation_catalogue();
  EXPECT_EQ(error_of([&] { resolve_translation_model("no-such-translator", catalogue, dir); }).code(),
            ErrorCode::kInvalidArgument);
  const Error missing = error_of([&] { resolve_translation_model("/nonexistent/model.gguf", catalogue, dir); });
  EXPECT_EQ(missing.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(missing.what()).find("does not exist"), std::string::npos) << missing.what();
  EXPECT_EQ(error_of([&] { resolve_translation_model(dir.string(), catalogue, dir); }).code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace earshot::models

// The translation stage's catalogue (Hy-MT2-1.8B GGUF quantisations): names, file
// names, download URLs and cache paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "model/registry.h"
#include "stages/translation/options.h"

namespace earshot::models {
namespace {

TEST(TranslationRegistry, FindsHyMt2ByNameOrFileName) {
  unsetenv("EARSHOT_MODEL_BASE_URL");
  const std::vector<ModelInfo> catalogue = stages::translation::translation_catalogue();
  const ModelInfo* q4 = find_model(catalogue, "hy-mt2-1.8b-q4_k_m");
  ASSERT_NE(q4, nullptr);
  EXPECT_EQ(find_model(catalogue, "Hy-MT2-1.8B-Q4_K_M.gguf"), q4);
  EXPECT_EQ(find_model(catalogue, "HY-MT2-1.8B-Q4_K_M"), q4);
  EXPECT_EQ(find_model(catalogue, "hy-mt2-1.8b-q3"), nullptr);
  EXPECT_EQ(model_url(*q4, std::nullopt),
            "https://huggingface.co/tencent/Hy-MT2-1.8B-GGUF/resolve/main/Hy-MT2-1.8B-Q4_K_M.gguf");
  EXPECT_EQ(model_url(*q4, std::string("http://mirror/models/")), "http://mirror/models/Hy-MT2-1.8B-Q4_K_M.gguf");
  EXPECT_EQ(cached_model_path(*q4, "/cache"), std::filesystem::path("/cache/Hy-MT2-1.8B-Q4_K_M.gguf"));
}

TEST(TranslationRegistry, EntriesAreDistinctGgufFiles) {
  std::set<std::string> names, files;
  for (const ModelInfo& m : stages::translation::translation_catalogue()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_TRUE(files.insert(m.repository + "/" + m.file).second) << m.file;
    EXPECT_TRUE(m.file.ends_with(".gguf")) << m.file;
    EXPECT_GT(m.approx_bytes, 0u);
    EXPECT_TRUE(static_cast<bool>(m.check)) << m.name;  // a pull checks the GGUF
  }
  EXPECT_GE(names.size(), 3u);
}

}  // namespace
}  // namespace earshot::models

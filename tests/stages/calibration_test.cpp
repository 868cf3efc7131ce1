#include "stages/translation/calibration.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace earshot::stages::translation {
namespace {

TEST(Calibration, ModelIdsLoseOrganisationAndQuantisation) {
  EXPECT_EQ(normalize_model_id("mlx-community/Hy-MT2-1.8B-8bit"), "hy-mt2-1.8b");
  EXPECT_EQ(normalize_model_id("tencent/Hy-MT2-1.8B-GGUF/Hy-MT2-1.8B-Q4_K_M.gguf"), "hy-mt2-1.8b");
  EXPECT_EQ(normalize_model_id("/models/Hy-MT2-1.8B-f16.gguf"), "hy-mt2-1.8b");
  EXPECT_EQ(normalize_model_id("Qwen3-0.6B"), "qwen3-0.6b");
  EXPECT_EQ(quantization_of("Hy-MT2-1.8B-Q4_K_M.gguf"), "q4_k_m");
  EXPECT_EQ(quantization_of("mlx-community/Hy-MT2-1.8B-4bit"), "4bit");
  EXPECT_EQ(quantization_of("Hy-MT2-1.8B"), "");
}

TEST(Calibration, ShippedEntriesAreThePublishedOnes) {
  CalibrationRegistry r = CalibrationRegistry::builtin();
  auto zh_en = r.find("Hy-MT2-1.8B-Q8_0.gguf", "zh", "en");
  ASSERT_TRUE(zh_en.entry);
  const std::vector<llm::AttentionHead> expected = {{9, 5},  {13, 1}, {9, 6},  {12, 11},
                                                    {14, 2}, {14, 0}, {4, 12}, {1, 10}};
  EXPECT_EQ(zh_en.entry->heads, expected);
  for (const char* source : {"en", "ja"}) {
    auto e = r.find("tencent/Hy-MT2-1.8B", source, "zh");
    ASSERT_TRUE(e.entry) << source;
    EXPECT_EQ(e.entry->heads.front(), (llm::AttentionHead{9, 5}));
  }
  // 4-bit zh->en is disabled, in any spelling of 4 bits.
  EXPECT_FALSE(r.find("mlx-community/Hy-MT2-1.8B-4bit", "zh", "en").entry);
  auto q4 = r.find("Hy-MT2-1.8B-Q4_K_M.gguf", "zh", "en");
  EXPECT_FALSE(q4.entry);
  EXPECT_NE(q4.reason.find("q4_k_m"), std::string::npos);
  auto none = r.find("Qwen3-0.6B", "en", "de");
  EXPECT_FALSE(none.entry);
  EXPECT_NE(none.reason.find("qwen3-0.6b en->de"), std::string::npos);
}

TEST(Calibration, UserFilesAddAndReplaceEntries) {
  const std::string path = ::testing::TempDir() + "/calibration.json";
  {
    std::ofstream out(path);
    out << R"({"entries": [{"model": "org/Qwen3-0.6B-Q8_0", "source": "EN", "target": "de", "heads": [[3, 1], [2, 0]]},
                          {"model": "hy-mt2-1.8b", "source": "zh", "target": "en", "heads": [[1, 1]]}]})";
  }
  CalibrationRegistry r = CalibrationRegistry::builtin();
  r.load_file(path);
  auto q = r.find("Qwen3-0.6B-f16.gguf", "en", "de");
  ASSERT_TRUE(q.entry);
  EXPECT_EQ(q.entry->heads, (std::vector<llm::AttentionHead>{{3, 1}, {2, 0}}));
  auto hy = r.find("Hy-MT2-1.8B-Q4_K_M", "zh", "en");  // replaced: no disabled quantisations now
  ASSERT_TRUE(hy.entry);
  EXPECT_EQ(hy.entry->heads, (std::vector<llm::AttentionHead>{{1, 1}}));
  // Round trip through the writer.
  auto again = parse_calibration_json(calibration_json(*q.entry));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].heads, q.entry->heads);
  EXPECT_EQ(again[0].model, "qwen3-0.6b");
  std::remove(path.c_str());
}

TEST(Calibration, BadFilesAreNamed) {
  CalibrationRegistry r;
  try {
    r.load_file("/nonexistent/cal.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cal.json"), std::string::npos);
  }
  const std::string path = ::testing::TempDir() + "/bad.json";
  {
    std::ofstream out(path);
    out << R"({"model": "m", "source": "en", "target": "de", "heads": [[1]]})";
  }
  EXPECT_THROW(r.load_file(path), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace earshot::stages::translation

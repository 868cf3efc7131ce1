// Head calibration from sentence pairs: planted heads (the scripted fake's
// attention, per captured head) are found in the order their attention follows
// the alignment, with the diagonal by default and a given word alignment.
#include "stages/translation/head_calibration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "common/error.h"
#include "fake_llm.h"

namespace earshot::stages::translation {
namespace {

using testing::FakeModel;
using testing::peaked;
using testing::ScriptToken;

constexpr int kHeadsPerLayer = 16;  // FakeModel's shape: 32 layers x 16 heads
int index_of(int layer, int head) { return layer * kHeadsPerLayer + head; }

// Captured head index (layer-major, as calibrate_heads asks for them) -> how it
// attends for target token k of n over n source tokens. Heads without a rule: a
// seeded random peak (a head attending somewhere unrelated).
using Rule = std::function<int(int k, int n)>;
testing::Script planted(std::map<int, Rule> rules) {
  return [rules](const std::vector<std::string>& source) {
    const int n = static_cast<int>(source.size());
    std::mt19937 rng(static_cast<unsigned>(n) * 7919u);
    std::vector<ScriptToken> out;
    for (int k = 0; k < n; ++k) {
      ScriptToken t{testing::upper(source[static_cast<size_t>(k)]), {}};
      for (int h = 0; h < index_of(12, 0); ++h) {
        auto it = rules.find(h);
        const int at = it != rules.end() ? it->second(k, n) : static_cast<int>(rng() % static_cast<unsigned>(n));
        t.attention.push_back(peaked(n, at, 0.6f));
      }
      out.push_back(std::move(t));
    }
    return out;
  };
}

std::vector<CalibrationPair> word_for_word_pairs() {
  return {{"the cat sat on the warm mat", "THE CAT SAT ON THE WARM MAT", {}},
          {"a bird sang in the old tree today", "A BIRD SANG IN THE OLD TREE TODAY", {}},
          {"we walked home", "WE WALKED HOME", {}},
          {"rain fell on every roof of the town", "RAIN FELL ON EVERY ROOF OF THE TOWN", {}}};
}

TEST(HeadCalibration, TheDiagonalHeadRanksFirst) {
  const Rule diagonal = [](int k, int) { return k; };
  const Rule one_ahead = [](int k, int n) { return std::min(k + 1, n - 1); };  // within tolerance, farther
  const Rule sink = [](int, int) { return 0; };
  FakeModel model(planted({{index_of(9, 5), diagonal}, {index_of(3, 2), one_ahead}, {index_of(0, 0), sink}}));
  const HeadCalibration c = calibrate_heads(model, word_for_word_pairs(), {"en", "fr"});
  EXPECT_EQ(c.pairs_used, 4);
  EXPECT_EQ(c.target_tokens, 7 + 8 + 3 + 8);
  EXPECT_TRUE(c.problems.empty());
  ASSERT_EQ(c.ranked.size(), 32u * 16u);
  EXPECT_EQ(c.ranked[0].head, (llm::AttentionHead{9, 5}));
  EXPECT_DOUBLE_EQ(c.ranked[0].score, 1.0);
  EXPECT_DOUBLE_EQ(c.ranked[0].mean_distance, 0.0);
  EXPECT_EQ(c.ranked[1].head, (llm::AttentionHead{3, 2}));
  EXPECT_DOUBLE_EQ(c.ranked[1].score, 1.0);
  EXPECT_GT(c.ranked[1].mean_distance, 0.0);
  EXPECT_LT(c.ranked[2].score, 1.0);
  for (size_t i = 1; i < c.ranked.size(); ++i) EXPECT_GE(c.ranked[i - 1].score, c.ranked[i].score);

  const CalibrationEntry e = calibration_entry(c, model.id(), "en", "fr", 2);
  EXPECT_EQ(e.model, "hy-mt2-1.8b");
  ASSERT_EQ(e.heads.size(), 2u);
  EXPECT_EQ(e.heads[0], (llm::AttentionHead{9, 5}));
  // The written entry is what --translation-calibration reads back.
  const std::vector<CalibrationEntry> back = parse_calibration_json(calibration_json(e));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].heads, e.heads);
  CalibrationRegistry registry;
  registry.add(back[0]);
  EXPECT_TRUE(registry.find(model.id(), "en", "fr").entry.has_value());
}

TEST(HeadCalibration, AGivenWordAlignmentDecidesOverTheDiagonal) {
  const Rule diagonal = [](int k, int) { return k; };
  const Rule reversed = [](int k, int n) { return n - 1 - k; };
  FakeModel model(planted({{index_of(9, 5), diagonal}, {index_of(2, 1), reversed}}));
  // Reordering pairs: target word k comes from source word n-1-k.
  std::vector<CalibrationPair> pairs = {{"one two three four five", "FIVE FOUR THREE TWO ONE", {}},
                                        {"red green blue black", "BLACK BLUE GREEN RED", {}}};
  pairs[0].alignment = parse_pharaoh("0-4 1-3 2-2 3-1 4-0");
  pairs[1].alignment = parse_pharaoh("0-3 1-2 2-1 3-0");
  const HeadCalibration aligned = calibrate_heads(model, pairs, {"en", "xx"});
  EXPECT_EQ(aligned.ranked[0].head, (llm::AttentionHead{2, 1}));
  EXPECT_DOUBLE_EQ(aligned.ranked[0].score, 1.0);

  for (auto& p : pairs) p.alignment.clear();
  const HeadCalibration diagonal_default = calibrate_heads(model, pairs, {"en", "xx"});
  EXPECT_EQ(diagonal_default.ranked[0].head, (llm::AttentionHead{9, 5}));
}

TEST(HeadCalibration, UnusablePairsAreListedAndNoneUsableIsAnError) {
  FakeModel model(planted({}));
  std::vector<CalibrationPair> pairs = {{"one two", "TWO ONE", {{5, 0}}}, {"a b c", "A B C", {}}};
  const HeadCalibration c = calibrate_heads(model, pairs, {"en", "xx"});
  EXPECT_EQ(c.pairs_used, 1);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("pair 1"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find("past the end"), std::string::npos) << c.problems[0];

  HeadCalibrationOptions tiny{"en", "xx"};
  tiny.context_tokens = 8;
  try {
    calibrate_heads(model, {pairs[1]}, tiny);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("do not fit the context"), std::string::npos) << e.what();
  }
}

TEST(HeadCalibration, PairsFileFormatsAndErrors) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("earshot-pairs-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(file);
    out << "# a comment\n"
        << R"({"source": "a b", "target": "B A", "alignment": "0-1 1-0"})"
        << "\n\n"
        << R"({"source": "c", "reference": "C", "alignment": [[0, 0]]})"
        << "\n"
        << R"({"source": "d", "translation": "D"})"
        << "\n";
  }
  const std::vector<CalibrationPair> pairs = read_calibration_pairs(file);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].target, "B A");
  EXPECT_EQ(pairs[0].alignment, (std::vector<std::pair<int, int>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(pairs[1].target, "C");
  EXPECT_EQ(pairs[1].alignment, (std::vector<std::pair<int, int>>{{0, 0}}));
  EXPECT_TRUE(pairs[2].alignment.empty());

  std::ofstream(file) << R"({"source": "a"})"
                      << "\n";
  try {
    read_calibration_pairs(file);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(file.string() + ":1:"), std::string::npos) << e.what();
  }
  std::filesystem::remove(file);
  EXPECT_THROW(parse_pharaoh("0-1 x-2"), Error);
  EXPECT_THROW(parse_pharaoh("3"), Error);
  try {
    read_calibration_pairs(file);  // removed
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
}

}  // namespace
}  // namespace earshot::stages::translation

// Size names and alignment heads chosen from the dimensions of every Whisper
// release, the fallback for unknown shapes, and parsing of user overrides.
#include "model/whisper/alignment_heads.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::whisper {
namespace {

Hparams dims(int32_t n_vocab, int32_t state, int32_t heads, int32_t layers, int32_t text_layers, int32_t n_mels = 80) {
  Hparams h;
  h.n_vocab = n_vocab;
  h.n_audio_ctx = 1500;
  h.n_text_ctx = 448;
  h.n_audio_state = h.n_text_state = state;
  h.n_audio_head = h.n_text_head = heads;
  h.n_audio_layer = layers;
  h.n_text_layer = text_layers;
  h.n_mels = n_mels;
  return h;
}

struct Release {
  Hparams hparams;
  std::string name;
  std::vector<AlignmentHead> heads;  // first and last of the preset
  size_t n_heads;
};

TEST(ModelSizeName, EveryReleaseIsRecognisedWithItsPreset) {
  const std::vector<Release> releases = {
      {dims(51864, 384, 6, 4, 4), "tiny.en", {{1, 0}, {3, 4}}, 8},
      {dims(51865, 384, 6, 4, 4), "tiny", {{2, 2}, {3, 5}}, 6},
      {dims(51864, 512, 8, 6, 6), "base.en", {{3, 3}, {5, 7}}, 5},
      {dims(51865, 512, 8, 6, 6), "base", {{3, 1}, {5, 6}}, 8},
      {dims(51864, 768, 12, 12, 12), "small.en", {{6, 6}, {11, 4}}, 19},
      {dims(51865, 768, 12, 12, 12), "small", {{5, 3}, {10, 5}}, 10},
      {dims(51864, 1024, 16, 24, 24), "medium.en", {{11, 4}, {21, 12}}, 18},
      {dims(51865, 1024, 16, 24, 24), "medium", {{13, 15}, {23, 4}}, 6},
      // large-v1 has the same shape as v2; the shape is reported as v2.
      {dims(51865, 1280, 20, 32, 32), "large-v2", {{10, 12}, {27, 15}}, 23},
      {dims(51866, 1280, 20, 32, 32, 128), "large-v3", {{7, 0}, {25, 6}}, 10},
      {dims(51866, 1280, 20, 32, 4, 128), "large-v3-turbo", {{2, 4}, {3, 14}}, 6},
  };
  for (const Release& r : releases) {
    EXPECT_EQ(model_size_name(r.hparams), r.name);
    const auto heads = default_alignment_heads(r.hparams);
    ASSERT_EQ(heads.size(), r.n_heads) << r.name;
    EXPECT_EQ(heads.front(), r.heads.front()) << r.name;
    EXPECT_EQ(heads.back(), r.heads.back()) << r.name;
    EXPECT_EQ(heads, alignment_heads_preset(r.name)) << r.name;
    for (const AlignmentHead& h : heads) {
      EXPECT_LT(h.layer, r.hparams.n_text_layer) << r.name;
      EXPECT_LT(h.head, r.hparams.n_text_head) << r.name;
    }
  }
  EXPECT_EQ(alignment_heads_preset("large-v1").size(), 9u);
  EXPECT_TRUE(alignment_heads_preset("huge").empty());
}

TEST(ModelSizeName, ShapesOfNoReleaseAreUnknown) {
  EXPECT_EQ(model_size_name(dims(51866, 384, 6, 4, 4, 128)), "");     // v3 vocabulary at tiny size
  EXPECT_EQ(model_size_name(dims(51866, 1280, 20, 32, 32, 80)), "");  // v3 vocabulary, 80 mels
  EXPECT_EQ(model_size_name(dims(51865, 1280, 20, 32, 32, 128)), "");
  EXPECT_EQ(model_size_name(dims(51864, 1280, 20, 32, 32)), "");  // no large.en exists
  EXPECT_EQ(model_size_name(dims(51865, 384, 6, 4, 2)), "");
  EXPECT_EQ(model_size_name(dims(51865, 64, 2, 2, 2)), "");
  Hparams short_ctx = dims(51864, 384, 6, 4, 4);
  short_ctx.n_audio_ctx = 750;
  EXPECT_EQ(model_size_name(short_ctx), "");
}

TEST(DefaultAlignmentHeads, UnknownShapeUsesEveryHeadOfTheLastHalfOfTheDecoder) {
  const auto heads = default_alignment_heads(dims(51865, 64, 2, 2, 5));
  const std::vector<AlignmentHead> expected = {{2, 0}, {2, 1}, {3, 0}, {3, 1}, {4, 0}, {4, 1}};
  EXPECT_EQ(heads, expected);
  EXPECT_EQ(default_alignment_heads(dims(51865, 64, 2, 2, 1)), (std::vector<AlignmentHead>{{0, 0}, {0, 1}}));
}

TEST(ParseAlignmentHeads, ReadsLayerHeadPairs) {
  const Hparams tiny = dims(51864, 384, 6, 4, 4);
  EXPECT_EQ(parse_alignment_heads("1,0;3,5", tiny), (std::vector<AlignmentHead>{{1, 0}, {3, 5}}));
  EXPECT_EQ(parse_alignment_heads(" 2 , 3 ; 0,0 ;", tiny), (std::vector<AlignmentHead>{{2, 3}, {0, 0}}));
}

TEST(ParseAlignmentHeads, RejectsMalformedOrOutOfRangeText) {
  const Hparams tiny = dims(51864, 384, 6, 4, 4);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "no heads given"},
      {"1", "entry '1' has no comma"},
      {"a,1", "'a' is not a number"},
      {"1,2x", "'2x' is not a number"},
      {"1,0;;2,0", "empty entry"},
      {"4,0", "layer 4 is outside 0..3"},
      {"-1,0", "layer -1 is outside 0..3"},
      {"0,6", "head 6 is outside 0..5"},
      {"1,1;1,1", "(1,1) is listed twice"},
  };
  for (const auto& [text, fragment] : cases) {
    try {
      parse_alignment_heads(text, tiny);
      ADD_FAILURE() << "\"" << text << "\" parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace earshot::whisper

// Loads generated models of several shapes and weight types and checks that
// the header, the vocabulary, the mel filters and every tensor (shape, type,
// bytes) come back exactly as the writer stored them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "features/mel.h"
#include "model/whisper/model.h"
#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"
#include "model_test_util.h"

namespace earshot::whisper {
namespace {

using testing::small_spec;
using testing::TempDir;

struct Case {
  std::string name;
  std::string template_size;
  ggml_type type;
  int n_mels;
  int n_vocab;
};

class LoadGeneratedModel : public ::testing::TestWithParam<Case> {};

std::vector<uint8_t> tensor_bytes(const ggml_tensor* t) {
  std::vector<uint8_t> bytes(ggml_nbytes(t));
  ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
  return bytes;
}

TEST_P(LoadGeneratedModel, RoundTripsHeaderVocabularyFiltersAndEveryTensor) {
  const Case& c = GetParam();
  TempDir dir("loader");
  RandomModelSpec spec = small_spec(c.template_size, c.type, 11);
  spec.hparams.n_mels = c.n_mels;
  spec.hparams.n_vocab = c.n_vocab;
  const auto path = dir / "model.bin";
  write_random_model(spec, path);

  const auto model = Model::load(path);
  const Hparams& h = model->hparams();
  EXPECT_EQ(h.n_vocab, c.n_vocab);
  EXPECT_EQ(h.n_audio_ctx, 24);
  EXPECT_EQ(h.n_audio_state, 64);
  EXPECT_EQ(h.n_audio_head, 2);
  EXPECT_EQ(h.n_audio_layer, 2);
  EXPECT_EQ(h.n_text_ctx, 16);
  EXPECT_EQ(h.n_text_state, 64);
  EXPECT_EQ(h.n_text_head, 2);
  EXPECT_EQ(h.n_text_layer, 2);
  EXPECT_EQ(h.n_mels, c.n_mels);
  EXPECT_EQ(h.ftype, ftype_of_weight_type(c.type));
  EXPECT_EQ(h.quantization_version, ggml_is_quantized(c.type) ? GGML_QNT_VERSION : 0);
  EXPECT_EQ(model->weight_type(), c.type);
  EXPECT_EQ(model->size_name(), "");
  EXPECT_EQ(model->path(), path);
  ASSERT_NE(model->backend(), nullptr);

  // Filters: the template's own for 80 bins, Whisper's computed bank for 128.
  const MelFilters& filters = model->mel_filters();
  EXPECT_EQ(filters.n_mel, c.n_mels);
  EXPECT_EQ(filters.n_fft, 201);
  const std::vector<float> expected_filters =
      c.n_mels == 80 ? read_file_header(spec.template_path).mel_filters.data : features::mel_filter_bank(c.n_mels);
  EXPECT_EQ(filters.data, expected_filters);

  // Vocabulary: the template's 50257 tokens, then placeholders up to n_vocab.
  const std::vector<std::string>& vocab = model->vocabulary();
  ASSERT_EQ(vocab.size(), static_cast<size_t>(c.n_vocab));
  EXPECT_EQ(vocab[0], "!");
  EXPECT_EQ(vocab[220], " ");
  EXPECT_EQ(vocab[50257], "[_extra_token_50257]");
  EXPECT_EQ(vocab.back(), "[_extra_token_" + std::to_string(c.n_vocab - 1) + "]");

  // Every tensor: where it sits in Weights, its shape and type, and its exact bytes.
  const Weights& w = model->weights();
  ASSERT_EQ(w.encoder.size(), 2u);
  ASSERT_EQ(w.decoder.size(), 2u);
  const std::vector<TensorSpec> specs = model_tensor_specs(h, c.type);
  EXPECT_EQ(specs.size(), 11u + 15 * 2 + 24 * 2);  // 7 encoder and 4 decoder globals, then per layer
  int checked = 0;
  auto check = [&](const ggml_tensor* t, const std::string& name) {
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(std::string(t->name), name);
    const TensorSpec* spec_of = nullptr;
    for (const TensorSpec& s : specs) {
      if (s.name == name) spec_of = &s;
    }
    ASSERT_NE(spec_of, nullptr) << name;
    EXPECT_EQ(t->type, spec_of->type) << name;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(t->ne[i], spec_of->ne[i]) << name << " ne[" << i << "]";
    EXPECT_EQ(tensor_bytes(t), random_tensor_bytes(11, *spec_of)) << name;
    ++checked;
  };
  check(w.enc_pos, "encoder.positional_embedding");
  check(w.conv1_w, "encoder.conv1.weight");
  check(w.conv1_b, "encoder.conv1.bias");
  check(w.conv2_w, "encoder.conv2.weight");
  check(w.conv2_b, "encoder.conv2.bias");
  check(w.enc_ln_w, "encoder.ln_post.weight");
  check(w.enc_ln_b, "encoder.ln_post.bias");
  check(w.dec_pos, "decoder.positional_embedding");
  check(w.token_emb, "decoder.token_embedding.weight");
  check(w.dec_ln_w, "decoder.ln.weight");
  check(w.dec_ln_b, "decoder.ln.bias");
  for (int i = 0; i < 2; ++i) {
    const std::string e = "encoder.blocks." + std::to_string(i) + ".";
    const EncoderLayer& l = w.encoder[i];
    check(l.attn_ln_w, e + "attn_ln.weight");
    check(l.attn_ln_b, e + "attn_ln.bias");
    check(l.attn_q_w, e + "attn.query.weight");
    check(l.attn_q_b, e + "attn.query.bias");
    check(l.attn_k_w, e + "attn.key.weight");
    check(l.attn_v_w, e + "attn.value.weight");
    check(l.attn_v_b, e + "attn.value.bias");
    check(l.attn_out_w, e + "attn.out.weight");
    check(l.attn_out_b, e + "attn.out.bias");
    check(l.mlp_ln_w, e + "mlp_ln.weight");
    check(l.mlp_ln_b, e + "mlp_ln.bias");
    check(l.mlp_0_w, e + "mlp.0.weight");
    check(l.mlp_0_b, e + "mlp.0.bias");
    check(l.mlp_1_w, e + "mlp.2.weight");
    check(l.mlp_1_b, e + "mlp.2.bias");
    const std::string d = "decoder.blocks." + std::to_string(i) + ".";
    const DecoderLayer& m = w.decoder[i];
    check(m.attn_ln_w, d + "attn_ln.weight");
    check(m.attn_ln_b, d + "attn_ln.bias");
    check(m.attn_q_w, d + "attn.query.weight");
    check(m.attn_q_b, d + "attn.query.bias");
    check(m.attn_k_w, d + "attn.key.weight");
    check(m.attn_v_w, d + "attn.value.weight");
    check(m.attn_v_b, d + "attn.value.bias");
    check(m.attn_out_w, d + "attn.out.weight");
    check(m.attn_out_b, d + "attn.out.bias");
    check(m.cross_ln_w, d + "cross_attn_ln.weight");
    check(m.cross_ln_b, d + "cross_attn_ln.bias");
    check(m.cross_q_w, d + "cross_attn.query.weight");
    check(m.cross_q_b, d + "cross_attn.query.bias");
    check(m.cross_k_w, d + "cross_attn.key.weight");
    check(m.cross_v_w, d + "cross_attn.value.weight");
    check(m.cross_v_b, d + "cross_attn.value.bias");
    check(m.cross_out_w, d + "cross_attn.out.weight");
    check(m.cross_out_b, d + "cross_attn.out.bias");
    check(m.mlp_ln_w, d + "mlp_ln.weight");
    check(m.mlp_ln_b, d + "mlp_ln.bias");
    check(m.mlp_0_w, d + "mlp.0.weight");
    check(m.mlp_0_b, d + "mlp.0.bias");
    check(m.mlp_1_w, d + "mlp.2.weight");
    check(m.mlp_1_b, d + "mlp.2.bias");
  }
  EXPECT_EQ(checked, static_cast<int>(specs.size()));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LoadGeneratedModel,
                         ::testing::Values(Case{"f32_en", "tiny.en", GGML_TYPE_F32, 80, 51864},
                                           Case{"f16_multilingual", "tiny", GGML_TYPE_F16, 80, 51865},
                                           Case{"q8_0_v3_128mels", "tiny", GGML_TYPE_Q8_0, 128, 51866},
                                           Case{"q5_0_en", "tiny.en", GGML_TYPE_Q5_0, 80, 51864},
                                           Case{"q5_1_multilingual", "tiny", GGML_TYPE_Q5_1, 80, 51865},
                                           Case{"q4_0_multilingual_128mels", "tiny", GGML_TYPE_Q4_0, 128, 51865},
                                           Case{"q4_1_en", "tiny.en", GGML_TYPE_Q4_1, 80, 51864}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Storage types follow whisper.cpp: 1-D, conv biases and positional embeddings f32,
// conv kernels f16 unless the file is all-f32, every other matrix in the weight type.
TEST(ModelTensorSpecs, StorageTypesFollowWhisperCpp) {
  Hparams h;  // tiny.en
  for (ggml_type wtype : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q5_0}) {
    const auto specs = model_tensor_specs(h, wtype);
    EXPECT_EQ(specs.size(), 11u + 15 * 4 + 24 * 4);
    for (const TensorSpec& s : specs) {
      ggml_type expected = wtype;
      if (s.n_dims == 1 || s.name == "encoder.conv1.bias" || s.name == "encoder.conv2.bias" ||
          s.name.find("positional_embedding") != std::string::npos) {
        expected = GGML_TYPE_F32;
      } else if (s.n_dims == 3) {
        expected = wtype == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
      }
      EXPECT_EQ(s.type, expected) << s.name << " in a " << type_name(wtype) << " file";
    }
  }
  const auto specs = model_tensor_specs(h, GGML_TYPE_F16);
  EXPECT_EQ(specs.front().name, "encoder.positional_embedding");
  EXPECT_EQ(specs.front().ne, (std::array<int64_t, 4>{384, 1500, 1, 1}));
  EXPECT_EQ(specs[1].name, "encoder.conv1.weight");
  EXPECT_EQ(specs[1].ne, (std::array<int64_t, 4>{3, 80, 384, 1}));
  EXPECT_EQ(specs[2].ne, (std::array<int64_t, 4>{1, 384, 1, 1}));
  EXPECT_EQ(specs.back().name, "decoder.ln.bias");
}

TEST(RandomModelWriter, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir dir("writer");
  const RandomModelSpec spec = small_spec("tiny.en", GGML_TYPE_Q8_0, 3);
  write_random_model(spec, dir / "a.bin");
  write_random_model(spec, dir / "b.bin");
  RandomModelSpec other = spec;
  other.seed = 4;
  write_random_model(other, dir / "c.bin");
  const auto a = testing::read_bytes(dir / "a.bin");
  const auto b = testing::read_bytes(dir / "b.bin");
  const auto c = testing::read_bytes(dir / "c.bin");
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
  // Header, filters and vocabulary do not depend on the seed; tensor data does.
  const auto records = testing::parse_records(a);
  const size_t first_data = records.front().data_offset;
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(first_data), c.begin()));
}

TEST(RandomModelWriter, ValuesHaveTheDocumentedScales) {
  Hparams h;
  h.n_audio_state = h.n_text_state = 128;
  h.n_audio_head = h.n_text_head = 2;
  h.n_audio_layer = h.n_text_layer = 1;
  for (const TensorSpec& s : model_tensor_specs(h, GGML_TYPE_F16)) {
    double expected_mean = 0.0, expected_std = 0.0;
    switch (s.init) {
      case TensorInit::kMatrix:
        expected_std = 1.0 / std::sqrt(static_cast<double>(s.n_dims == 3 ? s.ne[0] * s.ne[1] : s.ne[0]));
        break;
      case TensorInit::kBias:
      case TensorInit::kLayerNormBias: expected_std = 0.02; break;
      case TensorInit::kLayerNormWeight: expected_mean = 1.0, expected_std = 0.1; break;
      case TensorInit::kEmbedding: expected_std = 3.0 / std::sqrt(128.0); break;
      case TensorInit::kPositional: expected_std = 0.1; break;
    }
    const std::vector<float> v = random_tensor_values(5, s);
    double sum = 0, sum2 = 0;
    for (float x : v) sum += x;
    const double mean = sum / v.size();
    for (float x : v) sum2 += (x - mean) * (x - mean);
    const double stddev = std::sqrt(sum2 / v.size());
    // 128 samples at least: 4 standard errors of the mean and of the deviation.
    const double n = static_cast<double>(v.size());
    EXPECT_NEAR(mean, expected_mean, 4 * expected_std / std::sqrt(n)) << s.name;
    EXPECT_NEAR(stddev, expected_std, 4 * expected_std / std::sqrt(2 * n)) << s.name;
  }
}

TEST(RandomModelWriter, TiktokenVocabularyKeepsExactBytes) {
  TempDir dir("tiktoken");
  RandomModelSpec spec = small_spec("tiny.en");
  write_random_model(spec, dir / "template.bin");
  spec.vocab_tiktoken = testing::shared_dir() / "models" / "whisper-gpt2.tiktoken";
  write_random_model(spec, dir / "tiktoken.bin");
  const auto from_template = Model::load(dir / "template.bin");
  const auto from_tiktoken = Model::load(dir / "tiktoken.bin");
  // Token 94 is the single byte 0xa1; the template stores it as U+FFFD.
  EXPECT_EQ(from_template->vocabulary()[94], "\xef\xbf\xbd");
  EXPECT_EQ(from_tiktoken->vocabulary()[94], "\xa1");
  EXPECT_EQ(from_tiktoken->vocabulary()[0], "!");
  EXPECT_EQ(from_tiktoken->vocabulary()[50255], " gazed");
  // The English template's <|endoftext|> after the last rank is kept.
  EXPECT_EQ(from_tiktoken->vocabulary()[50256], "<|endoftext|>");
  EXPECT_EQ(from_tiktoken->vocabulary()[50257], "[_extra_token_50257]");
}

TEST(RandomModelWriter, RejectsDimensionsTheFormatCannotHold) {
  TempDir dir("reject");
  RandomModelSpec spec = small_spec("tiny.en", GGML_TYPE_Q4_0);
  spec.hparams.n_audio_state = spec.hparams.n_text_state = 48;  // not a multiple of q4_0's 32-wide blocks
  try {
    write_random_model(spec, dir / "x.bin");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not a multiple of the q4_0 block size 32"), std::string::npos) << e.what();
  }
  spec = small_spec();
  spec.hparams.n_text_head = 3;
  EXPECT_THROW(write_random_model(spec, dir / "y.bin"), Error);
}

TEST(ModelLoad, ChoosesPresetHeadsAndSizeNameFromRealDimensions) {
  TempDir dir("tiny");
  RandomModelSpec spec;
  spec.template_path = testing::template_path("tiny.en");
  spec.hparams = read_file_header(spec.template_path).hparams;
  spec.weight_type = GGML_TYPE_Q4_0;  // smallest file at real tiny.en dimensions
  write_random_model(spec, dir / "tiny.en.bin");
  const auto model = Model::load(dir / "tiny.en.bin");
  EXPECT_EQ(model->size_name(), "tiny.en");
  EXPECT_EQ(model->alignment_heads(), alignment_heads_preset("tiny.en"));

  LoadOptions options;
  options.alignment_heads = {{3, 5}, {0, 1}};
  EXPECT_EQ(Model::load(dir / "tiny.en.bin", options)->alignment_heads(), options.alignment_heads);
  options.alignment_heads = {{4, 0}};
  try {
    Model::load(dir / "tiny.en.bin", options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("alignment head (4,0) is outside"), std::string::npos) << e.what();
  }
}

TEST(ModelLoad, ComputesFiltersWhenTheFileHasNone) {
  TempDir dir("nofilters");
  write_random_model(small_spec(), dir / "model.bin");
  auto bytes = testing::read_bytes(dir / "model.bin");
  // Replace the 80x201 filters by an empty 0x0 table.
  const size_t filter_bytes = 80 * 201 * 4;
  testing::set_i32(bytes, testing::kMelOffset, 0);
  testing::set_i32(bytes, testing::kMelOffset + 4, 0);
  bytes.erase(bytes.begin() + testing::kMelOffset + 8, bytes.begin() + testing::kMelOffset + 8 + filter_bytes);
  testing::write_bytes(dir / "nofilters.bin", bytes);
  const auto model = Model::load(dir / "nofilters.bin");
  EXPECT_EQ(model->mel_filters().n_mel, 80);
  EXPECT_EQ(model->mel_filters().n_fft, 201);
  EXPECT_EQ(model->mel_filters().data, features::mel_filter_bank(80));
}

}  // namespace
}  // namespace earshot::whisper

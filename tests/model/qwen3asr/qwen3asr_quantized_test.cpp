// Qwen3-ASR pairs quantised as users get them (ggml-org's Q8_0 text model and
// mmproj: earshot-make-qwen3asr --type q8_0) and at 4 bits (--type q4_0, the
// mmproj at Q8_0), against the F16 pair they come from: the mmproj's tensors
// take the converter's types, and over AlignAtt-like passes on LibriVox
// (teacher-forced: every model steps the F16 model's greedy tokens) the greedy
// choices agree where the F16 margin is clear, with the logits' largest
// difference stated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "audio/audio.h"
#include "common/error.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/q8_gemm.h"

namespace earshot::qwen3asr {
namespace {

namespace fs = std::filesystem;

struct Qwen3AsrQuantized : ::testing::Test {
  static inline fs::path dir;
  static inline WrittenPair f16, q8, q4;
  static inline std::vector<float> speech;
  static void SetUpTestSuite() {
    dir = fs::temp_directory_path() / ("earshot-qwen3asr-quantized-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    PairDims dims = PairDims::tiny();  // rows of whole 32-blocks everywhere, as the real dimensions have
    f16 = write_random_pair(dims, EARSHOT_QWEN2_VOCAB, dir / "f16", 31);
    for (auto [pair, name, type] : {std::tuple{&q8, "q8", GGML_TYPE_Q8_0}, std::tuple{&q4, "q4", GGML_TYPE_Q4_0}}) {
      *pair = {dir / (std::string(name) + ".gguf"), dir / (std::string(name) + "-mmproj.gguf")};
      fs::copy_file(f16.text, pair->text);
      fs::copy_file(f16.mmproj, pair->mmproj);
      quantize_text_model(pair->text, type);
      quantize_mmproj(pair->mmproj, GGML_TYPE_Q8_0);
    }
    const fs::path librivox = fs::path(EARSHOT_SHARED_DIR) / "data" / "librivox";
    for (const char* clip : {"0870", "0880", "0890", "0920", "0930"}) {
      const std::vector<float> a =
          audio::load_file(librivox / ("sense_and_sensibility_01_austen_64kb-" + std::string(clip) + ".wav"));
      speech.insert(speech.end(), a.begin(), a.end());
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir); }
};

TEST_F(Qwen3AsrQuantized, TheMmprojTakesTheConvertersTypes) {
  const runtime::GgufFile m = runtime::GgufFile::open(q8.mmproj);
  const auto type_of = [&](const char* name) {
    const runtime::GgufTensor* t = m.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->type : GGML_TYPE_COUNT;
  };
  for (const char* matrix : {"a.blk.0.attn_q.weight", "a.blk.1.attn_out.weight", "a.blk.0.ffn_up.weight",
                             "a.blk.1.ffn_down.weight", "mm.a.mlp.1.weight", "mm.a.mlp.2.weight"}) {
    EXPECT_EQ(type_of(matrix), GGML_TYPE_Q8_0) << matrix;
  }
  EXPECT_EQ(type_of("a.conv2d.1.weight"), GGML_TYPE_F16);  // ".conv" weights: F16 in the converter
  EXPECT_EQ(type_of("a.conv_out.weight"), GGML_TYPE_F16);
  EXPECT_EQ(type_of("a.blk.0.ln1.weight"), GGML_TYPE_F32);
  EXPECT_EQ(type_of("a.blk.0.attn_q.bias"), GGML_TYPE_F32);
  EXPECT_EQ(m.find_u32("general.file_type").value_or(0), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
  EXPECT_THROW(quantize_mmproj(q8.mmproj, GGML_TYPE_Q4_0), Error);
}

struct Parity {
  int steps = 0, agree = 0, clear = 0, clear_agree = 0;
  float max_diff = 0, max_logit = 0;
};

// Passes as AlignAtt makes them over 20 s of speech (1 s apart, the buffer
// trimmed by whole windows past 15 s, the last committed tokens after the
// prompt), each model prefilled and stepped with the F16 model's tokens.
Parity compare(const WrittenPair& quantised, const std::vector<float>& speech) {
  ModelOptions options;
  options.n_threads = 1;
  Session a(Model::load(Qwen3AsrQuantized::f16.text, Qwen3AsrQuantized::f16.mmproj, options), {{3, 0}});
  Session b(Model::load(quantised.text, quantised.mmproj, options), {{3, 0}});
  Parity p;
  const auto count = [&] {
    const std::vector<float>&x = a.logits(), &y = b.logits();
    const auto best = std::max_element(x.begin(), x.end());
    float second = -INFINITY;
    for (auto it = x.begin(); it != x.end(); ++it)
      if (it != best) second = std::max(second, *it);
    const bool agree = std::max_element(y.begin(), y.end()) - y.begin() == best - x.begin();
    const bool clear = *best - second > 0.25f;
    ++p.steps;
    p.agree += agree;
    p.clear += clear;
    p.clear_agree += clear && agree;
    for (size_t k = 0; k < x.size(); ++k) {
      p.max_diff = std::max(p.max_diff, std::abs(x[k] - y[k]));
      p.max_logit = std::max(p.max_logit, std::abs(x[k]));
    }
  };
  std::vector<int32_t> committed;
  size_t begin = 0;
  for (size_t end = 16000; end <= 20 * 16000; end += 16000) {
    while (end - begin > 15 * 16000) begin += static_cast<size_t>(kWindowSamples);
    const std::span<const float> buffer(speech.data() + begin, end - begin);
    a.encode(buffer);
    b.encode(buffer);
    PromptSpec prompt{"", "English", {}};
    prompt.prefix_tokens.assign(committed.end() - std::min<std::ptrdiff_t>(30, std::ssize(committed)), committed.end());
    int32_t token = a.prefill(prompt);
    b.prefill(prompt);
    count();
    std::vector<int32_t> pass{token};
    for (int step = 0; step < 5 && !a.model().is_end(token); ++step) {
      b.step(token);
      token = a.step(token);
      count();
      pass.push_back(token);
    }
    committed.insert(committed.end(), pass.begin(), pass.begin() + std::min<std::ptrdiff_t>(3, std::ssize(pass)));
  }
  return p;
}

TEST_F(Qwen3AsrQuantized, GreedyChoicesAgreeWithTheF16PairWhereItsMarginIsClear) {
  for (auto [pair, name] : {std::pair{&q8, "q8_0"}, std::pair{&q4, "q4_0"}}) {
    const Parity p = compare(*pair, speech);
    std::printf(
        "%s text + q8_0 mmproj against f16: %d of %d greedy choices equal (%d of %d where the f16 margin > 0.25), "
        "max |logit diff| %.3f of max |logit| %.2f\n",
        name, p.agree, p.steps, p.clear_agree, p.clear, p.max_diff, p.max_logit);
    EXPECT_GE(p.steps, 60) << name;
    EXPECT_GT(p.clear, p.steps / 2) << name;
    if (std::string(name) == "q8_0") {
      EXPECT_EQ(p.clear_agree, p.clear) << name;
      EXPECT_LT(p.max_diff, 0.1f * p.max_logit) << name;
    } else {
      EXPECT_GE(p.clear_agree, p.clear * 9 / 10) << name;
    }
  }
}

// Two sessions of the Q8_0 pair whose quantised products run different ways: the
// same number of audio tokens, embeddings within `embd_tolerance` of their scale
// (and not equal: the products did run differently), and b's logits, fed a's
// tokens, close to a's with the same greedy choice wherever a's margin is clear of
// twice their difference (a random model's near-ties may fall either way, and where
// is up to the CPU's kernels). Returns the largest logit difference over the
// largest logit.
float agreement(Session& a, Session& b, const std::vector<float>& speech, float embd_tolerance, const char* what) {
  const std::span<const float> buffer(speech.data(), 4 * 16000);
  EXPECT_EQ(a.encode(buffer), b.encode(buffer));
  float diff = 0, scale = 0;
  for (size_t i = 0; i < a.audio_embeddings().size(); ++i) {
    diff = std::max(diff, std::abs(a.audio_embeddings()[i] - b.audio_embeddings()[i]));
    scale = std::max(scale, std::abs(a.audio_embeddings()[i]));
  }
  EXPECT_LT(diff, embd_tolerance * scale) << diff << " of " << scale;
  EXPECT_GT(diff, 0.0f);
  int clear = 0;
  float worst = 0;
  const auto agree = [&](int32_t ta, int32_t tb, int step) {
    const std::vector<float>&x = a.logits(), &y = b.logits();
    float d = 0, top = 0, second = -INFINITY;
    for (size_t k = 0; k < x.size(); ++k) {
      d = std::max(d, std::abs(x[k] - y[k]));
      top = std::max(top, std::abs(x[k]));
      if (static_cast<int32_t>(k) != ta) second = std::max(second, x[k]);
    }
    worst = std::max(worst, d / top);
    if (x[static_cast<size_t>(ta)] - second <= 2 * d) return;
    ++clear;
    EXPECT_EQ(tb, ta) << "step " << step << ": a margin of " << x[static_cast<size_t>(ta)] - second << ", logits " << d
                      << " apart";
  };
  int32_t token = a.prefill({"", "English", {}});
  agree(token, b.prefill({"", "English", {}}), 0);
  for (int i = 1; i <= 4; ++i) {
    const int32_t next = a.step(token);
    agree(next, b.step(token), i);
    token = next;
  }
  std::printf("%s: encoder output %.3g of %.3g apart, max |logit diff| / max |logit| %.3g, %d of 5 choices clear\n",
              what, diff, scale, worst, clear);
  return worst;
}

// Counts the encoder graph's custom ops and ggml products of a Q8_0 weight.
struct Ops {
  int custom = 0, q8_mul_mat = 0;
  // The model loaded with `options` counts into this.
  void watch(ModelOptions& options) {
    options.encoder_eval_callback = &Ops::count;
    options.encoder_eval_data = this;
  }
  static bool count(ggml_tensor* t, bool ask, void* self) {
    if (!ask) return true;
    auto* ops = static_cast<Ops*>(self);
    ops->custom += t->op == GGML_OP_CUSTOM;
    ops->q8_mul_mat += t->op == GGML_OP_MUL_MAT && t->src[0]->type == GGML_TYPE_Q8_0;
    return false;
  }
};

// With the products on OpenBLAS, a quantised weight's products of many rows (the
// encoder's, a prompt's) run dequantised on OpenBLAS or on ggml's int8 kernels as
// asked; both give the same greedy choices, within the int8 activations' rounding.
TEST_F(Qwen3AsrQuantized, QuantisedProductsRunWhereAskedAndAgree) {
  Ops blas_ops, ggml_ops;
  ModelOptions blas_options, ggml_options;
  blas_options.n_threads = ggml_options.n_threads = 1;
  blas_options.cpu_kernels = ggml_options.cpu_kernels = runtime::CpuKernels::kOpenBlas;
  blas_options.quantized_products = ModelOptions::QuantizedProducts::kOpenBlas;
  ggml_options.quantized_products = ModelOptions::QuantizedProducts::kGgml;
  blas_ops.watch(blas_options);
  ggml_ops.watch(ggml_options);
  const auto blas_model = Model::load(q8.text, q8.mmproj, blas_options);
  const auto ggml_model = Model::load(q8.text, q8.mmproj, ggml_options);
  EXPECT_TRUE(blas_model->quantized_on_openblas());
  EXPECT_FALSE(ggml_model->quantized_on_openblas());
  EXPECT_FALSE(blas_model->int8_products());
  EXPECT_FALSE(ggml_model->int8_products());
  Session a(blas_model, {{3, 0}}), b(ggml_model, {{3, 0}});
  EXPECT_LT(agreement(a, b, speech, 0.05f, "Q8_0 products on OpenBLAS against ggml's"), 0.05f);
  // The blocks' six products and the projector's two are Q8_0: on OpenBLAS none is a
  // MUL_MAT node, on ggml all of them are.
  EXPECT_EQ(blas_ops.q8_mul_mat, 0);
  EXPECT_EQ(ggml_ops.q8_mul_mat, 2 * 6 + 2);
  EXPECT_GT(blas_ops.custom, ggml_ops.custom);
}

// Without AVX512-VNNI, asking for earshot's int8 op is refused with the reason; on
// a CPU with it, Q8_0 products of many rows run there (the default) and agree with
// ggml's int8 kernels as the OpenBLAS ones do.
TEST_F(Qwen3AsrQuantized, Int8ProductsRunWhereTheCpuHasThemAndAgree) {
  ModelOptions int8_options, ggml_options;
  int8_options.n_threads = ggml_options.n_threads = 2;
  int8_options.quantized_products = ModelOptions::QuantizedProducts::kInt8;
  ggml_options.quantized_products = ModelOptions::QuantizedProducts::kGgml;
  {
    // Below AVX512-VNNI (capped here; every CPU without it runs this way), refused.
    runtime::ScopedKernelCap cap(runtime::CpuPath::kAvx512);
    try {
      Model::load(q8.text, q8.mmproj, int8_options);
      ADD_FAILURE() << "int8 products were taken without AVX512-VNNI";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("AVX512-VNNI"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(Model::load(q8.text, q8.mmproj, {})->int8_products());  // auto: ggml's or OpenBLAS
  }
  if (!runtime::cpu_has(runtime::CpuPath::kAvx512Vnni)) return;  // the rest needs the instructions
  Ops int8_ops, ggml_ops;
  int8_ops.watch(int8_options);
  ggml_ops.watch(ggml_options);
  const auto int8_model = Model::load(q8.text, q8.mmproj, int8_options);
  const auto ggml_model = Model::load(q8.text, q8.mmproj, ggml_options);
  EXPECT_TRUE(int8_model->int8_products());
  EXPECT_FALSE(ggml_model->int8_products());
  EXPECT_TRUE(Model::load(q8.text, q8.mmproj, {})->int8_products());  // auto: here
  // conv_out's F16 kernel (8 channels x 16 bins a row) goes to the int8 op as a Q8_0
  // copy beside the Q8_0 encoder; the convs' rows (3 x 3 x 8) are not of 32-blocks.
  EXPECT_EQ(int8_model->stem_q8_kernels(), 1);
  EXPECT_EQ(ggml_model->stem_q8_kernels(), 0);
  Session a(int8_model, {{3, 0}}), b(ggml_model, {{3, 0}});
  EXPECT_LT(agreement(a, b, speech, 0.05f, "Q8_0 products on the int8 op against ggml's"), 0.05f);
  // Of the 14 Q8_0 products of a window (52 rows for 4 s), none is left to ggml.
  EXPECT_EQ(int8_ops.q8_mul_mat, 0);
  EXPECT_EQ(ggml_ops.q8_mul_mat, 2 * 6 + 2);
}

// The conv stem's F16 kernels whose rows are of 32-blocks (conv2d.2, conv2d.3 and
// conv_out at 32 channels, as at the real 480) run on the int8 op as Q8_0 copies
// where the encoder's Q8_0 products do (a quantised mmproj keeps them F16), and
// agree with the same pair's products dequantised on OpenBLAS; an F16 mmproj's
// stem, or one whose products are not on the int8 op, keeps its kernels.
TEST_F(Qwen3AsrQuantized, TheConvStemOfAQuantisedEncoderRunsOnTheInt8Op) {
  if (!runtime::cpu_has(runtime::CpuPath::kAvx512Vnni)) {
    EXPECT_EQ(Model::load(q8.text, q8.mmproj, {})->stem_q8_kernels(), 0);  // no int8 op: no copies
    return;
  }
  PairDims dims = PairDims::tiny();
  dims.audio.conv_channels = 32;  // 3 x 3 x 32 values a conv kernel row
  const WrittenPair f16_32 = write_random_pair(dims, EARSHOT_QWEN2_VOCAB, dir / "c32", 5);
  const WrittenPair q8_32 = {dir / "c32q8.gguf", dir / "c32q8-mmproj.gguf"};
  fs::copy_file(f16_32.text, q8_32.text);
  fs::copy_file(f16_32.mmproj, q8_32.mmproj);
  quantize_mmproj(q8_32.mmproj, GGML_TYPE_Q8_0);
  ModelOptions int8_options, blas_options;
  int8_options.quantized_products = ModelOptions::QuantizedProducts::kInt8;
  blas_options.quantized_products = ModelOptions::QuantizedProducts::kOpenBlas;
  const auto int8_model = Model::load(q8_32.text, q8_32.mmproj, int8_options);
  const auto blas_model = Model::load(q8_32.text, q8_32.mmproj, blas_options);
  EXPECT_EQ(int8_model->stem_q8_kernels(), 3);
  EXPECT_EQ(blas_model->stem_q8_kernels(), 0);
  EXPECT_EQ(Model::load(f16_32.text, f16_32.mmproj, int8_options)->stem_q8_kernels(), 0);
  Session a(blas_model, {{3, 0}}), b(int8_model, {{3, 0}});
  EXPECT_LT(agreement(a, b, speech, 0.05f, "a 32-channel stem on the int8 op against OpenBLAS"), 0.05f);
}

}  // namespace
}  // namespace earshot::qwen3asr

// Qwen3-ASR on libllama + libmtmd with a generated random-weight pair: the pair
// loads (and wrong files are refused with messages that say what to pass), the
// audio and control tokens sit at Qwen3-ASR's ids, audio token counts follow the
// reference model, and the per-step attention of the alignment heads comes
// through the eval callback (rows sum to 1; the test fails if the tensor name
// kq_soft_max-<layer> disappears), KV suffix removal and encoder-output reuse.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "common/error.h"
#include "model/qwen3asr/model.h"
#include "model/qwen3asr/model_writer.h"
#include "model/runtime/gguf_file.h"

namespace earshot::qwen3asr {
namespace {

namespace fs = std::filesystem;

struct Qwen3Asr : ::testing::Test {
  static inline WrittenPair pair;
  static inline std::shared_ptr<const Model> model;
  static void SetUpTestSuite() {
    const fs::path dir = fs::temp_directory_path() / ("earshot-qwen3asr-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    pair = write_random_pair(PairDims::tiny(), EARSHOT_QWEN2_VOCAB, dir / "tiny", 7);
    model = Model::load(pair.text, pair.mmproj);
  }
  static void TearDownTestSuite() {
    model.reset();
    fs::remove_all(pair.text.parent_path());
  }
  static std::vector<float> tone(double seconds) {
    std::vector<float> pcm(static_cast<size_t>(seconds * 16000));
    for (size_t i = 0; i < pcm.size(); ++i) pcm[i] = 0.3f * std::sin(0.05f * static_cast<float>(i) * (1 + i / 8000));
    return pcm;
  }
};

std::string error_of(const std::function<void()>& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

TEST_F(Qwen3Asr, ThePairLoadsWithQwen3AsrShapes) {
  EXPECT_EQ(model->n_layer(), 4);
  EXPECT_EQ(model->n_head(), 4);
  EXPECT_EQ(model->n_embd(), 64);
  EXPECT_EQ(model->n_vocab(), kVocabSize);
}

TEST_F(Qwen3Asr, AudioAndControlTokensSitAtQwen3AsrIds) {
  EXPECT_EQ(model->tokenize("<|im_start|>", true), std::vector<int32_t>{kImStart});
  EXPECT_EQ(model->tokenize("<|im_end|>", true), std::vector<int32_t>{kImEnd});
  EXPECT_EQ(model->tokenize("<|audio_start|>", true), std::vector<int32_t>{kAudioStart});
  EXPECT_EQ(model->tokenize("<|audio_end|>", true), std::vector<int32_t>{kAudioEnd});
  EXPECT_EQ(model->tokenize("<|audio_pad|>", true), std::vector<int32_t>{kAudioPad});
  EXPECT_EQ(model->tokenize("<asr_text>", true), std::vector<int32_t>{kAsrText});
  // <asr_text> is rendered: the decoded "language X<asr_text>..." is split on it.
  EXPECT_EQ(model->piece(kAsrText), "<asr_text>");
  EXPECT_EQ(model->detokenize(model->tokenize("language English", false)), "language English");
}

TEST_F(Qwen3Asr, WrongFilesAreRefusedWithWhatToPass) {
  ErrorCode code{};
  EXPECT_NE(error_of([&] { Model::load(pair.text, ""); }, &code).find("--mmproj"), std::string::npos);
  EXPECT_EQ(code, ErrorCode::kInvalidModel);
  EXPECT_NE(error_of([&] { Model::load(pair.mmproj, pair.text); }).find("pass it with --mmproj"), std::string::npos);
  EXPECT_NE(error_of([&] { Model::load(pair.text, pair.text); }).find("not an mmproj"), std::string::npos);
  error_of([&] { Model::load(pair.text.string() + ".missing", pair.mmproj); }, &code);
  EXPECT_EQ(code, ErrorCode::kIo);
  // An mmproj of another projector (Qwen2-Audio's).
  const fs::path other = pair.text.parent_path() / "qwen2a-mmproj.gguf";
  {
    runtime::GgufWriter w;
    w.set_architecture("clip");
    w.set("clip.has_audio_encoder", true);
    w.set("clip.audio.projector_type", std::string("qwen2a"));
    const std::vector<float> one{1.0f};
    w.add_tensor_f32("a.post_ln.weight", GGML_TYPE_F32, std::vector<int64_t>{1}, one);
    w.write(other);
  }
  EXPECT_NE(error_of([&] { Model::load(pair.text, other); }).find("'qwen2a', not Qwen3-ASR's"), std::string::npos);
}

TEST_F(Qwen3Asr, AudioTokenCountsFollowTheReferenceModel) {
  Session s(model, {{3, 0}});
  // 1 s: 101 mel frames = one chunk of 100 (13 tokens) + one frame (1 token).
  EXPECT_EQ(s.encode(tone(1.0)), 14);
  EXPECT_EQ(s.encode(tone(2.0)), 27);
  EXPECT_EQ(s.audio_embeddings().size(), 27u * 64u);
  // jfk.wav's 1101 frames: the reference's 144, where mtmd gives 156 (model-families.md).
  EXPECT_EQ(s.encode(std::vector<float>(176000, 0.01f)), 144);
  ModelOptions mtmd_count;
  mtmd_count.reference_audio_length = false;
  auto padded = Model::load(pair.text, pair.mmproj, mtmd_count);
  Session p(padded, {{3, 0}});
  EXPECT_EQ(p.encode(tone(1.0)), 26);  // the last window zero-padded to 200 frames
  EXPECT_EQ(p.encode(std::vector<float>(176000, 0.01f)), 156);
}

// --qwen3-mel-frames hf: n / 160 mel frames as Hugging Face's feature extractor
// makes them, one fewer than libmtmd. The count drops by one token where the
// extra frame alone made one (a frame starting a new 100-frame chunk, or a new
// stride-8 step within the last chunk), and the tokens kept are mtmd's first ones.
TEST_F(Qwen3Asr, HfMelFramesDropTheTokenOfTheLastStftFrame) {
  ModelOptions hf;
  hf.mel_frames = MelFrames::kHf;
  auto hf_model = Model::load(pair.text, pair.mmproj, hf);
  Session h(hf_model, {{3, 0}});
  Session m(model, {{3, 0}});
  EXPECT_EQ(h.encode(tone(1.0)), 13);                           // 100 frames: one whole chunk
  EXPECT_EQ(h.encode(tone(2.0)), 26);                           // whole seconds: 13 per second
  EXPECT_EQ(h.encode(std::vector<float>(176000, 0.01f)), 143);  // jfk.wav: 1100 frames (mtmd: 144)
  // 1.08 s: 108 frames, the 8 after the chunk make 1 token; mtmd's 109th frame makes a second.
  EXPECT_EQ(h.encode(std::vector<float>(17280, 0.01f)), 14);
  EXPECT_EQ(m.encode(std::vector<float>(17280, 0.01f)), 15);
  // 1.05 s: 105 frames vs 106, both 1 token after the chunk: the same count.
  EXPECT_EQ(h.encode(std::vector<float>(16800, 0.01f)), 14);
  EXPECT_EQ(m.encode(std::vector<float>(16800, 0.01f)), 14);
  // The kept tokens are mtmd's first ones (the extra frame sits in a chunk of its own here).
  const std::vector<float> pcm = tone(2.0);
  m.encode(pcm);
  h.encode(pcm);
  ASSERT_EQ(m.audio_embeddings().size(), 27u * 64u);
  ASSERT_EQ(h.audio_embeddings().size(), 26u * 64u);
  EXPECT_TRUE(std::equal(h.audio_embeddings().begin(), h.audio_embeddings().end(), m.audio_embeddings().begin()));
  ErrorCode code{};
  EXPECT_NE(error_of([&] { h.encode(std::vector<float>(100, 0.01f)); }, &code).find("no audio token"),
            std::string::npos);
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  hf.reference_audio_length = false;
  EXPECT_THROW(Model::load(pair.text, pair.mmproj, hf), Error);
}

TEST_F(Qwen3Asr, StepsCaptureTheAlignmentHeadsAttentionOntoTheAudioSpan) {
  const std::vector<Head> heads = {{3, 0}, {3, 3}, {2, 1}};
  Session s(model, heads);
  const int n_audio = s.encode(tone(2.0));
  int32_t token = s.prefill({"", "English", {}});
  ASSERT_GE(token, 0);
  ASSERT_LT(token, kVocabSize);
  // The prompt: system, user turn with the audio span, assistant turn with the forced language.
  const auto& prompt = s.prompt_tokens();
  EXPECT_EQ(prompt[static_cast<size_t>(s.audio_begin()) - 1], kAudioStart);
  EXPECT_EQ(prompt[static_cast<size_t>(s.audio_begin() + n_audio)], kAudioEnd);
  EXPECT_EQ(prompt.back(), kAsrText);
  for (int i = 0; i < 4; ++i) {
    const int pos = s.n_past();
    token = s.step(token);
    ASSERT_EQ(s.step_frames().size(), heads.size());
    for (size_t k = 0; k < heads.size(); ++k) {
      // -1 would mean the callback never saw kq_soft_max-<layer>: the name llama.cpp gives it changed.
      ASSERT_GE(s.step_frames()[k], 0) << "no kq_soft_max-" << heads[k].first << " captured";
      ASSERT_LT(s.step_frames()[k], n_audio);
      const auto& row = s.step_rows()[k];
      ASSERT_GT(row.size(), static_cast<size_t>(pos));
      const double sum = std::accumulate(row.begin(), row.begin() + pos + 1, 0.0);
      EXPECT_NEAR(sum, 1.0, 1e-5) << "head " << k << " step " << i;
      for (size_t j = static_cast<size_t>(pos) + 1; j < row.size(); ++j) EXPECT_EQ(row[j], 0.0f);  // masked cells
      const auto span = row.begin() + s.audio_begin();
      EXPECT_EQ(std::max_element(span, span + n_audio) - span, s.step_frames()[k]);
    }
  }
}

TEST_F(Qwen3Asr, KvSuffixRemovalAndEncoderReuseReproduceTheSameSteps) {
  Session s(model, {{3, 1}});
  s.encode(tone(1.5));
  const int32_t first = s.prefill({"context", "", {}});
  const int after_prompt = s.n_past();
  const int32_t second = s.step(first);
  const std::vector<float> logits2 = s.logits();
  const int32_t third = s.step(second);
  const int frame3 = s.step_frames()[0];
  // Re-decode from the second step: the cache keeps the prompt and the first token.
  s.truncate(after_prompt + 1);
  EXPECT_EQ(s.n_past(), after_prompt + 1);
  EXPECT_EQ(s.step(second), third);
  EXPECT_EQ(s.step_frames()[0], frame3);
  // A second prefill reuses the kept audio embeddings (no encode) and gives the same steps.
  EXPECT_EQ(s.prefill({"context", "", {}}), first);
  EXPECT_EQ(s.step(first), second);
  for (size_t i = 0; i < logits2.size(); i += 997) EXPECT_NEAR(s.logits()[i], logits2[i], 1e-4f);
  // The committed tokens carried as context go after the prompt.
  s.prefill({"context", "", {first, second}});
  EXPECT_EQ(s.n_past(), after_prompt + 2);
}

TEST_F(Qwen3Asr, AQ8TextModelFromLibllamasQuantizerLoadsAndStepsLikeTheF16One) {
  // The same pair with the text model's matrices quantised as llama-quantize
  // does (earshot-make-qwen3asr --type q8_0): its products take ggml's int8
  // kernels (AMX where the CPU has it); the mmproj stays F16.
  const fs::path q8 = pair.text.parent_path() / "tiny-q8.gguf";
  fs::copy_file(pair.text, q8, fs::copy_options::overwrite_existing);
  quantize_text_model(q8, GGML_TYPE_Q8_0);
  const runtime::GgufFile file = runtime::GgufFile::open(q8);
  ASSERT_NE(file.find_tensor("blk.0.ffn_up.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_up.weight")->type, GGML_TYPE_Q8_0);
  EXPECT_EQ(file.find_tensor("blk.3.attn_q.weight")->type, GGML_TYPE_Q8_0);
  EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->type, GGML_TYPE_F32);
  EXPECT_NE(error_of([&] { quantize_text_model(q8, GGML_TYPE_Q5_1); }).find("q8_0 or q4_0"), std::string::npos);

  const std::shared_ptr<const Model> quantised = Model::load(q8, pair.mmproj);
  Session a(model, {{3, 1}}), b(quantised, {{3, 1}});
  a.encode(tone(1.5));
  b.encode(tone(1.5));
  int32_t token = a.prefill({"", "English", {}});
  b.prefill({"", "English", {}});
  for (int i = 0; i < 3; ++i) {  // teacher-forced: both models step the F16 model's tokens
    const int32_t next = a.step(token);
    b.step(token);
    ASSERT_EQ(b.step_frames().size(), 1u);
    ASSERT_GE(b.step_frames()[0], 0);
    float diff = 0, scale = 0;
    for (size_t k = 0; k < a.logits().size(); ++k) {
      diff = std::max(diff, std::abs(a.logits()[k] - b.logits()[k]));
      scale = std::max(scale, std::abs(a.logits()[k]));
    }
    EXPECT_LT(diff, 0.05f * scale) << "step " << i << ": max |logit diff| " << diff << " of max |logit| " << scale;
    token = next;
  }
}

// The audio encoder on OpenBLAS (--cpu-kernels auto/openblas: earshot's patch to
// libmtmd hands every weight product, and the conv stem as f32 im2col products, to
// runtime::blas_mul_mat, and the attention to runtime::blas_attention) agrees with
// libmtmd's graph as it is upstream (--cpu-kernels ggml: f16 im2col, ggml's
// kernels), and it does run on OpenBLAS.
TEST_F(Qwen3Asr, EncoderProductsOnOpenBlasAgreeWithLibmtmdsOwnGraph) {
  struct Ops {
    int custom = 0, mul_mat = 0, conv_im2col_f32 = 0;
    static bool count(ggml_tensor* t, bool ask, void* self) {
      if (!ask) return true;
      auto* ops = static_cast<Ops*>(self);
      ops->custom += t->op == GGML_OP_CUSTOM;
      ops->mul_mat += t->op == GGML_OP_MUL_MAT;
      ops->conv_im2col_f32 += t->op == GGML_OP_IM2COL && t->type == GGML_TYPE_F32;
      return false;  // only counted: the graph is computed whole
    }
  } upstream_ops, blas_ops;
  ModelOptions upstream_options, blas_options;
  upstream_options.cpu_kernels = runtime::CpuKernels::kGgml;
  upstream_options.encoder_eval_callback = blas_options.encoder_eval_callback = &Ops::count;
  upstream_options.encoder_eval_data = &upstream_ops;
  blas_options.cpu_kernels = runtime::CpuKernels::kOpenBlas;
  blas_options.encoder_eval_data = &blas_ops;
  Session upstream(Model::load(pair.text, pair.mmproj, upstream_options), {{3, 1}});
  Session blas(Model::load(pair.text, pair.mmproj, blas_options), {{3, 1}});
  // 800-frame windows, a graph each; 100-frame chunks (n / 160 + 1 frames: 101 and 951)
  for (const auto& [seconds, windows, chunks] : {std::tuple{1.0, 1, 2}, std::tuple{9.5, 2, 10}}) {
    SCOPED_TRACE(seconds);
    upstream_ops = blas_ops = {};
    ASSERT_EQ(upstream.encode(tone(seconds)), blas.encode(tone(seconds)));
    // Upstream: every product on ggml. Ours: q, k, v, attention, out, up, down per
    // layer, the three convs and conv_out per chunk whose stem runs, and the
    // projector's two on OpenBLAS; nothing on ggml's products.
    EXPECT_EQ(upstream_ops.custom, 0);
    EXPECT_EQ(upstream_ops.conv_im2col_f32, 0);
    EXPECT_GE(upstream_ops.mul_mat, windows * (2 * 8 + 3 + 1 + 2));
    EXPECT_GE(blas_ops.custom, windows * (2 * 7 + 2) + blas.last_encode().stems * (3 + 1));
    EXPECT_EQ(blas.last_encode().stems + blas.last_encode().stems_kept, chunks);
    EXPECT_EQ(blas_ops.conv_im2col_f32, 3 * blas.last_encode().stems);
    EXPECT_EQ(blas_ops.mul_mat, 0);
    const std::vector<float>&a = upstream.audio_embeddings(), &b = blas.audio_embeddings();
    ASSERT_EQ(a.size(), b.size());
    float diff = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(a[i]));
    }
    // Upstream rounds the activations to f16 against f16 weights; ours are f32.
    EXPECT_LT(diff, 2e-3f * scale) << "max |diff| " << diff << " of max |value| " << scale;
    EXPECT_GT(diff, 0.0f);  // two different computations, not one path twice
  }
}

// The text model with F16 weights on earshot's patch to libllama (a prompt's
// products and attention on OpenBLAS, a step's products on runtime::gemv_mul_mat,
// all in f32) agrees with libllama's own kernels (--cpu-kernels ggml: activations
// and queries rounded to f16), teacher-forced over the prompt and steps, where the
// whole prompt is one batch of embeddings (the text tokens' rows read from the
// file) either way.
TEST_F(Qwen3Asr, TextProductsOnOpenBlasAgreeWithLibllamasOwnKernels) {
  ModelOptions upstream_options, blas_options;
  upstream_options.cpu_kernels = runtime::CpuKernels::kGgml;
  blas_options.cpu_kernels = runtime::CpuKernels::kOpenBlas;
  const auto upstream_model = Model::load(pair.text, pair.mmproj, upstream_options);
  const auto blas_model = Model::load(pair.text, pair.mmproj, blas_options);
  EXPECT_FALSE(upstream_model->on_openblas());
  EXPECT_TRUE(blas_model->on_openblas());
  Session upstream(upstream_model, {{3, 1}}), blas(blas_model, {{3, 1}});
  ASSERT_EQ(upstream.encode(tone(3.0)), blas.encode(tone(3.0)));
  float worst = 0, scale = 0;
  auto compare = [&](const char* what) {
    const std::vector<float>&a = upstream.logits(), &b = blas.logits();
    ASSERT_EQ(a.size(), b.size()) << what;
    float diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(a[i]));
    }
    worst = std::max(worst, diff);
  };
  int32_t token = upstream.prefill({"some earlier words", "English", {}});
  blas.prefill({"some earlier words", "English", {}});
  EXPECT_EQ(upstream.prompt_tokens(), blas.prompt_tokens());
  EXPECT_EQ(upstream.n_past(), blas.n_past());
  compare("prefill");
  float worst_attention = 0;
  for (int s = 0; s < 6; ++s) {  // teacher-forced: both decode upstream's choice
    const int32_t next = upstream.step(token);
    blas.step(token);
    compare("step");
    // The alignment head's row as AlignAtt reads it: ggml's ops upstream, earshot's
    // cache ops (f32 queries and probabilities) around ggml's softmax here.
    ASSERT_EQ(upstream.step_rows().size(), 1u);
    ASSERT_EQ(blas.step_rows().size(), 1u);
    const std::vector<float>&a = upstream.step_rows()[0], &b = blas.step_rows()[0];
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) worst_attention = std::max(worst_attention, std::abs(a[j] - b[j]));
    EXPECT_EQ(upstream.step_frames(), blas.step_frames());
    token = next;
  }
  // Upstream rounds the activations to f16 against f16 weights (and the audio
  // encoder's too); ours are f32.
  EXPECT_LT(worst, 2e-3f * scale) << "max |diff| " << worst << " of max |logit| " << scale;
  EXPECT_LT(worst_attention, 1e-3f) << "max |diff| of an attention weight";
  EXPECT_GT(worst, 0.0f);  // two different computations, not one path twice
}

TEST_F(Qwen3Asr, AlignmentHeadsOutsideTheModelAreRejected) {
  EXPECT_THROW(Session(model, {{4, 0}}), Error);
  EXPECT_THROW(Session(model, {{0, 4}}), Error);
}

TEST(Qwen3AsrLanguages, WhisperCodesMapToQwen3Names) {
  EXPECT_EQ(language_name("en"), "English");
  EXPECT_EQ(language_name("yue"), "Cantonese");
  EXPECT_EQ(language_name("xx"), "");
  EXPECT_EQ(language_code("Japanese"), "ja");
}

}  // namespace
}  // namespace earshot::qwen3asr

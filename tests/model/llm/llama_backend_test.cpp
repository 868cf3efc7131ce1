// LlamaModel / LlamaSession on random-weight hunyuan-dense and qwen3 GGUFs:
// load errors, vocabulary, the attention capture's invariants and the llama.cpp
// tensor names it depends on, suffix removal, greedy decoding that does not
// collapse.
#include "model/llm/llama_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "../error_of.h"
#include "llm_test_models.h"

namespace earshot::llm {
namespace {

using earshot::testing::error_of;
using testing::tiny_model;

LlamaModelOptions f32_cache() {
  LlamaModelOptions o;
  o.cache_type = GGML_TYPE_F32;
  o.threads = 2;
  return o;
}

std::shared_ptr<const LlamaModel> load(const std::string& arch) {
  static std::map<std::string, std::shared_ptr<const LlamaModel>> models;
  auto& m = models[arch];
  if (!m) m = LlamaModel::load(tiny_model(arch), f32_cache());
  return m;
}

// The same file with flash attention on and attention read by the Q/K route.
std::shared_ptr<const LlamaModel> load_qk(const std::string& arch, ggml_type cache = GGML_TYPE_F32) {
  static std::map<std::pair<std::string, int>, std::shared_ptr<const LlamaModel>> models;
  auto& m = models[{arch, static_cast<int>(cache)}];
  if (!m) {
    LlamaModelOptions o = f32_cache();
    o.cache_type = cache;
    o.attention_route = AttentionRoute::kQk;
    m = LlamaModel::load(tiny_model(arch), o);
  }
  return m;
}

std::vector<Token> some_tokens(int n, int n_vocab, int seed) {
  std::vector<Token> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = static_cast<Token>((seed * 7919 + i * 104729) % n_vocab);
  return t;
}

class LlamaBackend : public ::testing::TestWithParam<std::string> {};

TEST(LlamaModelLoad, NamesWhatIsWrongWithTheFile) {
  const auto dir = tiny_model("qwen3").parent_path();
  const Error missing = error_of([&] { LlamaModel::load(dir / "no-such.gguf", {}); });
  EXPECT_EQ(missing.code(), ErrorCode::kIo);
  EXPECT_NE(std::string(missing.what()).find("no-such.gguf"), std::string::npos) << missing.what();

  const auto foreign = dir / "page.gguf";
  std::ofstream(foreign) << "<!DOCTYPE html><html><body>Not found</body></html>";
  EXPECT_EQ(error_of([&] { LlamaModel::load(foreign, {}); }).code(), ErrorCode::kInvalidModel);

  const auto truncated = dir / "truncated.gguf";
  std::filesystem::copy_file(tiny_model("qwen3"), truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2);
  const Error cut = error_of([&] { LlamaModel::load(truncated, {}); });
  EXPECT_EQ(cut.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(std::string(cut.what()).find("truncated"), std::string::npos) << cut.what();

  // A vocabulary-only GPT-2 file: a valid GGUF of an architecture we do not run.
  const Error arch = error_of([&] { LlamaModel::load(testing::llama_models_dir() / "ggml-vocab-gpt-2.gguf", {}); });
  EXPECT_EQ(arch.code(), ErrorCode::kUnsupported);
  for (const char* name : {"'gpt2'", "hunyuan-dense", "qwen3", "qwen2", "gemma3"})
    EXPECT_NE(std::string(arch.what()).find(name), std::string::npos) << arch.what();
}

TEST(LlamaModelVocabulary, HunyuanControlTokensAreSingleIds) {
  auto model = load("hunyuan-dense");
  const int base = model->shape().n_vocab - static_cast<int>(hunyuan_control_tokens().size());
  ASSERT_EQ(base, 151936);  // the grafted Qwen2 vocabulary, then Hunyuan's tokens
  const std::string placeholder = "<｜hy_place▁holder▁no▁2｜>";
  const std::vector<Token> ids = model->find_tokens(placeholder);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(model->token_bytes(ids[0]), placeholder);
  EXPECT_EQ(model->tokenize("a" + placeholder, /*parse_special=*/true).back(), ids[0]);
  EXPECT_GT(model->tokenize(placeholder, /*parse_special=*/false).size(), 1u);
  EXPECT_TRUE(model->is_end_of_generation(model->find_tokens("<｜hy_end▁of▁sentence｜>").at(0)));
  EXPECT_FALSE(model->is_end_of_generation(ids[0]));
  EXPECT_EQ(model->architecture(), "hunyuan-dense");
  EXPECT_EQ(model->shape().n_layer, 3);
  EXPECT_EQ(model->shape().n_head_kv, 2);
}

TEST(LlamaModelVocabulary, ByteLevelVocabularySplitsCjkIntoPartialUtf8) {
  auto model = load("qwen3");
  const std::string text = "你好世界";
  const std::vector<Token> tokens = model->tokenize(text, false);
  std::string joined;
  bool partial = false;
  for (Token t : tokens) {
    const std::string bytes = model->token_bytes(t);
    joined += bytes;
    // A piece that ends inside a multi-byte sequence.
    partial |= (static_cast<unsigned char>(bytes.back()) & 0xC0) == 0x80 && bytes.size() < 3;
    partial |= (static_cast<unsigned char>(bytes.back()) & 0xC0) == 0xC0;
  }
  EXPECT_EQ(joined, text);
  EXPECT_TRUE(partial);
}

TEST_P(LlamaBackend, SoftmaxTensorOfEveryLayerExists) {
  // The capture reads llama.cpp's internal `kq_soft_max-<layer>`; this fails if
  // a llama.cpp update renames it.
  auto model = load(GetParam());
  auto session = model->open_session({.context_tokens = 64, .threads = 2});
  auto& llama = dynamic_cast<LlamaSession&>(*session);
  llama.capture().record_names = true;
  const std::vector<Token> prompt = some_tokens(5, model->shape().n_vocab, 1);
  session->decode(prompt);
  const auto& names = llama.capture().seen_names();
  for (int l = 0; l < model->shape().n_layer; ++l) {
    EXPECT_NE(std::find(names.begin(), names.end(), "kq_soft_max-" + std::to_string(l)), names.end()) << l;
  }
}

TEST_P(LlamaBackend, CapturedRowsSumToOneOverThePositionsSoFar) {
  auto model = load(GetParam());
  const ModelShape shape = model->shape();
  auto session = model->open_session({.context_tokens = 1024, .threads = 2});
  const std::vector<AttentionHead> heads = {{0, 0}, {shape.n_layer - 1, shape.n_head - 1}, {1, 2}};
  // 600 tokens: more than one ubatch (512), so rows arrive in two pieces.
  const std::vector<Token> prompt = some_tokens(600, shape.n_vocab, 2);
  session->set_attention_capture(heads, 0, 601);
  const AttentionRows rows = session->decode(prompt);
  ASSERT_EQ(rows.n_tokens, 600);
  ASSERT_EQ(rows.n_heads, 3);
  for (int t : {0, 1, 17, 511, 512, 599}) {
    for (int h = 0; h < 3; ++h) {
      double sum = 0.0;
      for (int c = 0; c <= t; ++c) sum += rows.at(t, h, c);
      EXPECT_NEAR(sum, 1.0, 1e-5) << "token " << t << " head " << h;
      EXPECT_EQ(rows.at(t, h, t + 1), 0.0f) << "causal: nothing on the next position";
    }
  }
  // A later step sees a narrower span: the same rows, cut to the span.
  session->set_attention_capture({{1, 2}}, 100, 200);
  const Token next = session->greedy();
  const AttentionRows step = session->decode(std::span(&next, 1));
  ASSERT_EQ(step.n_tokens, 1);
  ASSERT_EQ(step.n_columns(), 100);
  const float total = std::accumulate(step.values.begin(), step.values.end(), 0.0f);
  EXPECT_GT(total, 0.0f);
  EXPECT_LT(total, 1.0f);
}

TEST_P(LlamaBackend, RemoveSuffixThenDecodeMatchesAFreshDecode) {
  auto model = load(GetParam());
  const int n_vocab = model->shape().n_vocab;
  const std::vector<Token> prompt = some_tokens(12, n_vocab, 3);
  const std::vector<Token> draft = some_tokens(4, n_vocab, 4);
  const std::vector<Token> redraft = some_tokens(3, n_vocab, 5);

  auto a = model->open_session({.context_tokens = 64, .threads = 2});
  a->set_attention_capture({{1, 1}}, 0, 12);
  a->decode(prompt);
  a->decode(draft);
  a->remove_suffix(12);
  EXPECT_EQ(a->position(), 12);
  EXPECT_EQ(error_of([&] { a->greedy(); }).code(), ErrorCode::kInvalidArgument);
  const AttentionRows rows_a = a->decode(redraft);

  auto b = model->open_session({.context_tokens = 64, .threads = 2});
  b->set_attention_capture({{1, 1}}, 0, 12);
  b->decode(prompt);
  const AttentionRows rows_b = b->decode(redraft);

  const std::vector<float> la = a->last_log_probs(), lb = b->last_log_probs();
  ASSERT_EQ(la.size(), lb.size());
  double max_diff = 0.0;
  for (std::size_t i = 0; i < la.size(); ++i) max_diff = std::max(max_diff, std::abs(double(la[i]) - lb[i]));
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_EQ(a->greedy(), b->greedy());
  ASSERT_EQ(rows_a.values.size(), rows_b.values.size());
  for (std::size_t i = 0; i < rows_a.values.size(); ++i) EXPECT_NEAR(rows_a.values[i], rows_b.values[i], 1e-6);
}

// Speculative verification's primitive: the greedy choice after every token of
// one batch is what decoding them one by one chooses (the model's own greedy
// continuation teacher-forced), with the same attention rows and last logits.
TEST_P(LlamaBackend, DecodeEachGivesTheGreedyChoicesOfSteps) {
  auto model = load(GetParam());
  const int n_vocab = model->shape().n_vocab;
  const std::vector<Token> prompt = some_tokens(20, n_vocab, 6);
  auto a = model->open_session({.context_tokens = 128, .threads = 2});
  a->set_attention_capture({{0, 1}, {2, 3}}, 0, 20);
  a->decode(prompt);
  std::vector<Token> steps;  // the greedy continuation, step by step
  std::vector<float> step_rows;
  for (int i = 0; i < 10; ++i) {
    steps.push_back(a->greedy());
    if (i == 9) break;  // the last choice is not decoded
    const AttentionRows r = a->decode(std::span(&steps.back(), 1));
    step_rows.insert(step_rows.end(), r.values.begin(), r.values.end());
  }
  // One batch: the prompt and the continuation but its last token, choices
  // read from the prompt's last token on.
  std::vector<Token> batch = prompt;
  batch.insert(batch.end(), steps.begin(), steps.end() - 1);
  const int first = static_cast<int>(prompt.size()) - 1;
  auto b = model->open_session({.context_tokens = 128, .threads = 2});
  b->set_attention_capture({{0, 1}, {2, 3}}, 0, 20);
  std::vector<Token> choices;
  const AttentionRows rows = b->decode_each(batch, first, choices);
  EXPECT_EQ(choices, steps);
  EXPECT_EQ(b->greedy(), steps.back());
  EXPECT_EQ(b->position(), a->position());
  ASSERT_EQ(rows.n_tokens, static_cast<int>(batch.size()));
  // The rows of the continuation's tokens are the steps' rows.
  const std::size_t row = static_cast<std::size_t>(rows.n_heads * rows.n_columns());
  ASSERT_EQ(rows.values.size(), prompt.size() * row + step_rows.size());
  for (std::size_t i = 0; i < step_rows.size(); ++i)
    EXPECT_NEAR(rows.values[prompt.size() * row + i], step_rows[i], 1e-5);
  const std::vector<float> la = a->last_log_probs(), lb = b->last_log_probs();
  double max_diff = 0.0;
  for (std::size_t i = 0; i < la.size(); ++i) max_diff = std::max(max_diff, std::abs(double(la[i]) - lb[i]));
  EXPECT_LT(max_diff, 1e-4);

  // The default (the head in one decode, then one decode per token), as a
  // scripted session would use it.
  std::vector<Token> one_by_one;
  auto c = model->open_session({.context_tokens = 128, .threads = 2});
  c->set_attention_capture({{0, 1}, {2, 3}}, 0, 20);
  const AttentionRows default_rows = c->LlmSession::decode_each(batch, first, one_by_one);
  EXPECT_EQ(one_by_one, steps);
  EXPECT_EQ(default_rows.n_tokens, rows.n_tokens);
  EXPECT_EQ(default_rows.values.size(), rows.values.size());
}

TEST_P(LlamaBackend, GreedyDecodingDoesNotCollapseOntoOneToken) {
  auto model = load(GetParam());
  auto session = model->open_session({.context_tokens = 128, .threads = 2});
  session->decode(model->tokenize("The meeting starts at nine.", false));
  std::vector<Token> out;
  for (int i = 0; i < 32; ++i) {
    const Token t = session->greedy();
    out.push_back(t);
    session->decode(std::span(&t, 1));
  }
  const std::set<Token> distinct(out.begin(), out.end());
  EXPECT_GE(distinct.size(), 12u);
  int run = 1, longest = 1;
  for (std::size_t i = 1; i < out.size(); ++i) longest = std::max(longest, run = out[i] == out[i - 1] ? run + 1 : 1);
  EXPECT_LE(longest, 8);
  const std::vector<float> lp = session->last_log_probs();
  double mass = 0.0;
  for (float v : lp) mass += std::exp(double(v));
  EXPECT_NEAR(mass, 1.0, 1e-4);
}

TEST_P(LlamaBackend, SessionsOnOneModelRunConcurrentlyWithoutSharingState) {
  auto model = load(GetParam());
  const int n_vocab = model->shape().n_vocab;
  auto greedy_run = [&](int seed) {
    auto session = model->open_session({.context_tokens = 64, .threads = 1});
    session->set_attention_capture({{0, 0}}, 0, 8);
    session->decode(some_tokens(8, n_vocab, seed));
    std::vector<Token> out;
    for (int i = 0; i < 6; ++i) {
      out.push_back(session->greedy());
      session->decode(std::span(&out.back(), 1));
    }
    return out;
  };
  const std::vector<Token> alone_a = greedy_run(21), alone_b = greedy_run(22);
  ASSERT_NE(alone_a, alone_b);
  std::vector<Token> together_a, together_b;
  std::thread ta([&] { together_a = greedy_run(21); });
  std::thread tb([&] { together_b = greedy_run(22); });
  ta.join();
  tb.join();
  EXPECT_EQ(together_a, alone_a);
  EXPECT_EQ(together_b, alone_b);
}

TEST_P(LlamaBackend, RefusesWhatItCannotDo) {
  auto model = load(GetParam());
  auto session = model->open_session({.context_tokens = 8, .threads = 2});
  const ModelShape shape = model->shape();
  EXPECT_EQ(error_of([&] {
              session->set_attention_capture({{shape.n_layer, 0}}, 0, 4);
            }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { session->set_attention_capture({{0, 0}}, 4, 4); }).code(), ErrorCode::kInvalidArgument);
  const std::vector<Token> nine = some_tokens(9, shape.n_vocab, 6);
  EXPECT_EQ(error_of([&] { session->decode(nine); }).code(), ErrorCode::kInvalidArgument);
  const Token bad = shape.n_vocab;
  EXPECT_EQ(error_of([&] { session->decode(std::span(&bad, 1)); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { session->remove_suffix(1); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(session->position(), 0);

  LlamaModelOptions flash = f32_cache();
  flash.flash_attention = true;
  flash.warm_up = false;
  auto fa = LlamaModel::load(tiny_model(GetParam()), flash);
  auto fs = fa->open_session({.context_tokens = 16, .threads = 2});
  EXPECT_EQ(error_of([&] { fs->set_attention_capture({{0, 0}}, 0, 4); }).code(), ErrorCode::kUnsupported);
}

TEST_P(LlamaBackend, FlashAttentionNodeOfEveryLayerReadsQAndItsKeyCache) {
  // The Q/K route claims each layer's flash-attention node by its K operand, a
  // view of `cache_k_l<layer>`; its Q operand is the post-RoPE Q. This fails if
  // a llama.cpp update renames either.
  auto model = load_qk(GetParam());
  auto session = model->open_session({.context_tokens = 64, .threads = 2});
  auto& llama = dynamic_cast<LlamaSession&>(*session);
  llama.capture().record_names = true;
  session->decode(some_tokens(5, model->shape().n_vocab, 1));
  const auto& names = llama.capture().seen_names();
  const std::string q_name = GetParam() == "hunyuan-dense" ? "Qcur_norm-" : "Qcur-";
  for (int l = 0; l < model->shape().n_layer; ++l) {
    const std::string prefix = "flash_attn_ext(" + q_name + std::to_string(l) + " ";
    const std::string key = ", cache_k_l" + std::to_string(l) + " ";
    const bool found = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.starts_with(prefix) && n.find(key) != std::string::npos;
    });
    EXPECT_TRUE(found) << "layer " << l;
  }
  EXPECT_EQ(
      std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.starts_with("kq_soft_max"); }), 0);
}

TEST_P(LlamaBackend, QkRouteReturnsTheSoftmaxRoutesRows) {
  // F32 caches on both contexts. Layer 0's Q and K do not depend on how
  // attention was computed, so its rows agree to float rounding; deeper layers
  // see hidden states through flash attention's F16 K/V (ggml casts an F32
  // cache), so they agree within that rounding.
  auto soft = load(GetParam());
  auto qk = load_qk(GetParam());
  const ModelShape shape = soft->shape();
  std::vector<AttentionHead> heads;
  for (int l = 0; l < shape.n_layer; ++l)
    for (int h = 0; h < shape.n_head; ++h) heads.push_back({l, h});  // every KV head of every layer (GQA, MQA)
  auto a = soft->open_session({.context_tokens = 1024, .threads = 2});
  auto b = qk->open_session({.context_tokens = 1024, .threads = 2});
  // 600 tokens: two ubatches, so the Q/K route also sees a batch that starts
  // past position 0.
  const std::vector<Token> prompt = some_tokens(600, shape.n_vocab, 2);
  a->set_attention_capture(heads, 0, 601);
  b->set_attention_capture(heads, 0, 601);
  const AttentionRows ra = a->decode(prompt), rb = b->decode(prompt);
  ASSERT_EQ(rb.n_tokens, 600);
  ASSERT_EQ(rb.n_heads, static_cast<int>(heads.size()));
  double layer0 = 0.0, deeper = 0.0;
  for (int t = 0; t < 600; ++t) {
    for (int h = 0; h < rb.n_heads; ++h) {
      double sum = 0.0;
      for (int c = 0; c <= t; ++c) {
        sum += rb.at(t, h, c);
        double& worst = heads[h].layer == 0 ? layer0 : deeper;
        worst = std::max(worst, std::abs(double(ra.at(t, h, c)) - rb.at(t, h, c)));
      }
      ASSERT_NEAR(sum, 1.0, 1e-5) << "token " << t << " head " << h;
      ASSERT_EQ(rb.at(t, h, t + 1), 0.0f);
    }
  }
  EXPECT_LT(layer0, 1e-6);
  EXPECT_LT(deeper, 1e-3);  // measured 3e-4

  // A step over a narrower span: the same rows, cut to the span.
  const std::vector<AttentionHead> step_heads = {{1, 2}, {0, shape.n_head - 1}};
  a->set_attention_capture(step_heads, 100, 200);
  b->set_attention_capture(step_heads, 100, 200);
  const Token next = a->greedy();
  const AttentionRows sa = a->decode(std::span(&next, 1)), sb = b->decode(std::span(&next, 1));
  ASSERT_EQ(sb.n_columns(), 100);
  ASSERT_EQ(sb.values.size(), sa.values.size());
  for (std::size_t i = 0; i < sa.values.size(); ++i) EXPECT_NEAR(sa.values[i], sb.values[i], 1e-3) << i;
  for (int c = 100; c < 200; ++c) EXPECT_NEAR(sa.at(0, 1, c), sb.at(0, 1, c), 1e-6) << "layer 0, column " << c;
}

TEST_P(LlamaBackend, QkRouteReadsAnF16Cache) {
  // The serving default: an F16 cache, read through ggml's type conversion.
  auto model = load_qk(GetParam(), GGML_TYPE_F16);
  auto session = model->open_session({.context_tokens = 64, .threads = 2});
  const int last = model->shape().n_layer - 1;
  session->set_attention_capture({{last, 0}, {last, model->shape().n_head - 1}}, 0, 20);
  const AttentionRows rows = session->decode(some_tokens(20, model->shape().n_vocab, 8));
  for (int t = 0; t < 20; ++t) {
    for (int h = 0; h < 2; ++h) {
      double sum = 0.0;
      for (int c = 0; c < 20; ++c) sum += rows.at(t, h, c);
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(AttentionCaptureQk, FailsWhenNoFlashAttentionNodeArrives) {
  // What a renamed K cache (or a context with flash attention off) looks like.
  AttentionCapture capture(AttentionRoute::kQk);
  capture.set({{2, 0}}, 0, 4);
  capture.begin_decode(0, 3);
  const Error e = error_of([&] { capture.finish(); });
  EXPECT_EQ(e.code(), ErrorCode::kInternal);
  EXPECT_NE(std::string(e.what()).find("cache_k_l2"), std::string::npos) << e.what();
}

TEST(AttentionCaptureQk, RouteNamesAreValidated) {
  EXPECT_EQ(parse_attention_route("softmax"), AttentionRoute::kSoftmax);
  EXPECT_EQ(parse_attention_route("qk"), AttentionRoute::kQk);
  const Error e = error_of([] { parse_attention_route("flash"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
  EXPECT_EQ(attention_route_name(AttentionRoute::kQk), "qk");
}

INSTANTIATE_TEST_SUITE_P(RandomWeights, LlamaBackend, ::testing::Values("hunyuan-dense", "qwen3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "qwen3" ? std::string("qwen3") : std::string("hunyuan_dense");
                         });

}  // namespace
}  // namespace earshot::llm

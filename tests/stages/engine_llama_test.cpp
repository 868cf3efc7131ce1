// TranslationEngine on libllama random-weight models: re-drafts and finals that
// verify the last draft in one batch (EngineOptions.verify_drafts) give exactly
// the committed text, drafts and finals of plain step-by-step greedy decoding,
// over several models (hunyuan-dense with Qwen2's vocabulary, qwen3 with
// GPT-2's byte-level one that splits CJK characters into partial UTF-8 tokens;
// F32, Q8_0 and Q4_0 weights, whose batched products may run other kernels
// than one token's; several seeds), source sequences (English words, Chinese
// characters, both) and stop tokens (a single-id placeholder and a fragmented
// one, chosen among the tokens the model generates).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "bench/translation_reference.h"
#include "model/llm/llama_backend.h"
#include "model/llm/random_llm.h"
#include "stages/translation/engine.h"

namespace earshot::stages::translation {
namespace {

namespace fs = std::filesystem;

const std::string kPlaceholder1 =
    "<\xEF\xBD\x9Chy_place\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81"
    "1\xEF\xBD\x9C>";
const std::string kPlaceholder2 =
    "<\xEF\xBD\x9Chy_place\xE2\x96\x81holder\xE2\x96\x81no\xE2\x96\x81"
    "2\xEF\xBD\x9C>";

fs::path models_dir() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() / ("earshot-engine-llama-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    static struct Cleanup {
      fs::path path;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(path, ec);
      }
    } cleanup{d};
    return d;
  }();
  return dir;
}

struct Case {
  std::string arch;
  ggml_type weights;
  uint64_t seed;
};

std::string case_name(const Case& c) {
  return (c.arch == "qwen3" ? "qwen3" : "hunyuan") + std::string("_") + ggml_type_name(c.weights) + "_seed" +
         std::to_string(c.seed);
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

std::shared_ptr<const llm::LlamaModel> load(const Case& c) {
  static std::map<std::string, std::shared_ptr<const llm::LlamaModel>> loaded;
  auto& m = loaded[case_name(c)];
  if (m) return m;
  llm::RandomLlmSpec spec;
  spec.architecture = c.arch;
  const bool hunyuan = c.arch == "hunyuan-dense";
  spec.vocabulary = fs::path(EARSHOT_LLAMA_MODELS_DIR) / (hunyuan ? "ggml-vocab-qwen2.gguf" : "ggml-vocab-gpt-2.gguf");
  spec.hunyuan_control_tokens = hunyuan;
  spec.n_embd = 64;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.head_dim = 16;
  spec.n_ff = 128;
  spec.weight_type = c.weights;
  spec.seed = c.seed;
  const fs::path file = models_dir() / (case_name(c) + ".gguf");
  llm::write_random_llm(spec, file);
  llm::LlamaModelOptions o;
  o.threads = 2;
  o.warm_up = false;
  m = llm::LlamaModel::load(file, o);
  return m;
}

// The model with two of the tokens it generates declared Hunyuan placeholders:
// one as a single id, one as a two-token sequence (the engine's rolling window).
class StopModel : public llm::LlmModel {
 public:
  StopModel(std::shared_ptr<const llm::LlmModel> inner, llm::Token single, std::vector<llm::Token> pair)
      : inner_(std::move(inner)), single_(single), pair_(std::move(pair)) {}
  std::string id() const override { return inner_->id(); }
  std::string architecture() const override { return inner_->architecture(); }
  llm::ModelShape shape() const override { return inner_->shape(); }
  std::vector<llm::Token> tokenize(std::string_view text, bool special) const override {
    if (special && text == kPlaceholder2) return pair_;
    return inner_->tokenize(text, special);
  }
  std::string token_bytes(llm::Token t) const override { return inner_->token_bytes(t); }
  std::vector<llm::Token> find_tokens(std::string_view text) const override {
    if (text == kPlaceholder1) return {single_};
    if (text == kPlaceholder2) return {};
    return inner_->find_tokens(text);
  }
  bool is_end_of_generation(llm::Token t) const override { return inner_->is_end_of_generation(t); }
  std::unique_ptr<llm::LlmSession> open_session(const llm::SessionOptions& o) const override {
    return inner_->open_session(o);
  }

 private:
  std::shared_ptr<const llm::LlmModel> inner_;
  llm::Token single_;
  std::vector<llm::Token> pair_;
};

// What the model generates greedily after one translation prompt.
std::vector<llm::Token> probe(const llm::LlmModel& model, const std::string& source, int n) {
  const PromptTemplate t = prompt_template(model.architecture(), "", "zh");
  std::vector<llm::Token> prompt = model.tokenize(t.before_source, true);
  for (llm::Token s : model.tokenize(source, false)) prompt.push_back(s);
  for (llm::Token s : model.tokenize(t.after_source, true)) prompt.push_back(s);
  auto session = model.open_session({.context_tokens = 512, .threads = 0});
  std::vector<llm::Token> out;
  session->decode(prompt);
  for (int i = 0; i < n; ++i) {
    const llm::Token next = session->greedy();
    out.push_back(next);
    session->decode(std::span(&next, 1));
  }
  return out;
}

// One segment fed word by word (CJK: character by character): each step
// commits all but the last two pieces and shows those as the tail.
std::vector<std::string> pieces_of(const std::string& text) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = 1;
    if (c >= 0xE0 && c < 0xF0) {
      len = 3;
    } else {
      while (i + len < text.size() && text[i + len] != ' ' && static_cast<unsigned char>(text[i + len]) < 0x80) ++len;
    }
    pieces.push_back(text.substr(i, len));
    i += len;
  }
  return pieces;
}

struct EngineRun {
  std::vector<EngineUpdate> updates;
  std::vector<std::string> finals;
  EngineStats stats;
};

// mass_threshold above 1: nothing commits, so each final's prompt is its last
// draft's and the whole draft is the final's proposal.
EngineRun run_engine(const llm::LlmModel& model, bool verify, const std::vector<std::string>& segments,
                     double mass_threshold) {
  EngineOptions o;
  o.source_language = "en";
  o.target_language = "zh";
  o.heads = {{0, 1}, {1, 2}, {1, 3}};
  o.commit.mode = CommitMode::kMass;
  o.commit.mass_threshold = mass_threshold;
  o.redraft_source_tokens = 1;
  o.max_new_tokens = 20;
  o.context_tokens = 512;
  o.verify_drafts = verify;
  TranslationEngine engine(model, o);
  EngineRun run;
  for (const std::string& segment : segments) {
    const std::vector<std::string> pieces = pieces_of(segment);
    for (size_t n = 1; n <= pieces.size(); ++n) {
      std::string committed, tail;
      for (size_t i = 0; i < n; ++i) (i + 2 < n ? committed : tail) += pieces[i];
      if (committed.empty()) continue;
      run.updates.push_back(engine.update(committed, tail));
    }
    run.finals.push_back(engine.translate(segment));
    engine.reset();
  }
  run.stats = engine.stats();
  return run;
}

const std::vector<std::string> kSegments = {
    "the meeting starts at nine and we will talk about the plans",
    "\xE6\x88\x91\xE4\xBB\xAC\xE4\xBB\x8A\xE5\xA4\xA9\xE8\xAE\xA8\xE8\xAE\xBA\xE6\x98\x8E\xE5\xB9\xB4\xE7\x9A\x84"
    "\xE8\xAE\xA1\xE5\x88\x92",  // 我们今天讨论明年的计划
    "our team built a new \xE6\x9C\x8D\xE5\x8A\xA1 that people can use every day",
};

class Verification : public ::testing::TestWithParam<Case> {};

TEST_P(Verification, GivesTheOutputOfStepByStepGreedy) {
  auto inner = load(GetParam());
  const std::vector<llm::Token> a = probe(*inner, kSegments[0], 8);
  const std::vector<llm::Token> b = probe(*inner, kSegments[1], 8);
  StopModel model(inner, a[5], {b[3], b[4]});
  const EngineRun plain = run_engine(model, false, kSegments, 0.3);
  const EngineRun verified = run_engine(model, true, kSegments, 0.3);
  ASSERT_EQ(plain.updates.size(), verified.updates.size());
  for (size_t i = 0; i < plain.updates.size(); ++i) {
    EXPECT_EQ(plain.updates[i].committed, verified.updates[i].committed) << "update " << i;
    EXPECT_EQ(plain.updates[i].draft, verified.updates[i].draft) << "update " << i;
    EXPECT_EQ(plain.updates[i].called_model, verified.updates[i].called_model) << "update " << i;
  }
  EXPECT_EQ(plain.finals, verified.finals);
  EXPECT_EQ(plain.stats.generated, verified.stats.generated);
  EXPECT_EQ(plain.stats.proposed, 0);
  EXPECT_GT(verified.stats.proposed, 0);
  EXPECT_LE(verified.stats.accepted, verified.stats.proposed);
  // What verification saves: every accepted token is a step not taken.
  EXPECT_EQ(verified.stats.stepped, plain.stats.stepped - verified.stats.accepted);
  RecordProperty("proposed", std::to_string(verified.stats.proposed));
  RecordProperty("accepted", std::to_string(verified.stats.accepted));

  // Nothing committed: the final re-reads its last draft's prompt, so the
  // draft's tokens are accepted (the path that skips steps is exercised).
  const std::vector<std::string> one = {kSegments[0]};
  const EngineRun plain_final = run_engine(model, false, one, 2.0);
  const EngineRun verified_final = run_engine(model, true, one, 2.0);
  ASSERT_EQ(plain_final.updates.size(), verified_final.updates.size());
  for (size_t i = 0; i < plain_final.updates.size(); ++i)
    EXPECT_EQ(plain_final.updates[i].draft, verified_final.updates[i].draft) << "update " << i;
  EXPECT_EQ(plain_final.finals, verified_final.finals);
  EXPECT_GT(verified_final.stats.accepted, 0);
  EXPECT_EQ(verified_final.stats.stepped, plain_final.stats.stepped - verified_final.stats.accepted);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // Four models per architecture (each case writes and loads its own, tens of
  // seconds on a busy 2-core machine): every weight type, Q4_0 twice.
  for (const char* arch : {"hunyuan-dense", "qwen3"}) {
    out.push_back({arch, GGML_TYPE_F32, 3});
    out.push_back({arch, GGML_TYPE_Q8_0, 17});
    out.push_back({arch, GGML_TYPE_Q4_0, 3});
    out.push_back({arch, GGML_TYPE_Q4_0, 29});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(RandomModels, Verification, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return case_name(info.param); });

}  // namespace
}  // namespace earshot::stages::translation

namespace earshot::stages::translation {
namespace {

// The benchmarks' reference workload (bench/translation_reference.h) on a real
// libllama model and its real tokenizer: the engine's prompt is found, the
// committed target is always a prefix of its source and each final is its
// source, copied; over English words every re-draft's proposal (the last
// draft's rest) is accepted. (Where a longer source tokenizes its end
// differently, as "服" then "服务" may, the old draft's token is rightly not.)
TEST(ReferenceWorkload, OnLibllamaEveryReDraftRepeatsTheLastOneAndTheFinalCopiesTheSource) {
  const auto model = load({"hunyuan-dense", GGML_TYPE_Q4_0, 3});
  const auto reference =
      bench::reference_translation_model(model, bench::translation_reference_prompt(*model, "en", "zh"));
  EngineOptions o;
  o.source_language = "en";
  o.target_language = "zh";
  o.heads = {{0, 1}, {1, 2}, {1, 3}};
  o.commit.mode = CommitMode::kArgmax;
  o.redraft_source_tokens = 1;
  o.context_tokens = 512;
  TranslationEngine engine(*reference, o);
  for (const std::string& segment : {kSegments[0], kSegments[2]}) {
    const std::vector<std::string> pieces = pieces_of(segment);
    std::string committed_target;
    for (size_t n = 1; n <= pieces.size(); ++n) {
      std::string committed, tail;
      for (size_t i = 0; i < n; ++i) (i + 2 < n ? committed : tail) += pieces[i];
      if (committed.empty()) continue;
      committed_target += engine.update(committed, tail).committed;
      EXPECT_TRUE((committed + tail).starts_with(committed_target)) << committed_target;
    }
    EXPECT_EQ(engine.translate(segment), segment);
    engine.reset();
    if (segment == kSegments[0]) {
      const EngineStats s = engine.stats();
      EXPECT_GT(s.proposed, 0);
      EXPECT_EQ(s.accepted, s.proposed);
    }
  }
}

}  // namespace
}  // namespace earshot::stages::translation

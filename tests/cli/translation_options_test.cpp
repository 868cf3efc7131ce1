// The translation options as serve, transcribe and bench read them: the
// attention route (--translation-attention) reaches the loaded libllama model,
// --translation-batch wraps it in a batch context, and a bad value fails before
// any model is loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "../model/error_of.h"
#include "../support/process_temp_dir.h"
#include "model/llm/batched_llama.h"
#include "model/llm/llama_backend.h"
#include "model/llm/random_llm.h"
#include "stages/translation/options.h"

namespace earshot::stages::translation {
namespace {

namespace fs = std::filesystem;

const fs::path& tiny_llm() {
  static const fs::path file = [] {
    const fs::path dir = earshot::testing::process_temp_dir("translation-options");  // removed at the process's end
    llm::RandomLlmSpec spec;
    spec.architecture = "qwen3";
    spec.vocabulary = fs::path(EARSHOT_LLAMA_MODELS_DIR) / "ggml-vocab-gpt-2.gguf";
    const fs::path f = dir / "tiny.gguf";
    llm::write_random_llm(spec, f);
    return f;
  }();
  return file;
}

std::optional<TranslationSetup> read(std::vector<std::string> extra) {
  Args args("test", "");
  declare_translation_options(args, "translate-to");
  std::vector<std::string> argv = {"--translate-to", "zh"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  args.parse(argv);
  return read_translation_options(args, "translate-to", 5.0);
}

llm::AttentionRoute route_of(const TranslationSetup& setup) {
  return dynamic_cast<const llm::LlamaModel&>(setup.service->model()).options().attention_route;
}

TEST(TranslationOptions, TranslationBatchWrapsTheModelInABatchContext) {
  const auto plain = read({"--translation-model", tiny_llm().string()});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(dynamic_cast<const llm::BatchedLlamaModel*>(&plain->service->model()), nullptr);  // off by default
  const auto batched = read({"--translation-model", tiny_llm().string(), "--translation-batch", "3"});
  ASSERT_TRUE(batched.has_value());
  const auto* model = dynamic_cast<const llm::BatchedLlamaModel*>(&batched->service->model());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->max_sessions(), 3);
  const Error e = earshot::testing::error_of([] {
    read({"--translation-model", "/no/such/model.gguf", "--translation-batch", "-1"});
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("--translation-batch"), std::string::npos) << e.what();
}

// The pool's workers share the cores: each call gets its share of the
// backend's default (the cores, at most 4), at least one thread.
TEST(TranslationOptions, WorkersShareTheCores) {
  EXPECT_EQ(translation_threads(1, 2), 2);
  EXPECT_EQ(translation_threads(2, 2), 1);
  EXPECT_EQ(translation_threads(3, 2), 1);
  EXPECT_EQ(translation_threads(2, 16), 2);
  EXPECT_EQ(translation_threads(1, 0), 1);
  const auto two = read({"--translation-model", tiny_llm().string(), "--translation-workers", "2"});
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(dynamic_cast<const llm::LlamaModel&>(two->service->model()).options().threads,
            translation_threads(2, std::thread::hardware_concurrency()));
}

TEST(TranslationOptions, TheAttentionRouteReachesTheModel) {
  const auto softmax = read({"--translation-model", tiny_llm().string()});
  ASSERT_TRUE(softmax.has_value());
  EXPECT_EQ(route_of(*softmax), llm::AttentionRoute::kSoftmax);  // the default, as before
  const auto qk = read({"--translation-model", tiny_llm().string(), "--translation-attention", "qk"});
  ASSERT_TRUE(qk.has_value());
  EXPECT_EQ(route_of(*qk), llm::AttentionRoute::kQk);
  fs::remove_all(tiny_llm().parent_path());
}

TEST(TranslationOptions, ABadRouteFailsBeforeAnyLoad) {
  const Error e = earshot::testing::error_of([] {
    read({"--translation-model", "/no/such/model.gguf", "--translation-attention", "flash"});
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(e.what()).find("--translation-attention"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace earshot::stages::translation

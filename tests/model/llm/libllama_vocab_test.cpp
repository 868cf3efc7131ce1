// libllama, built by bootstrap against earshot's ggml and linked statically, loads
// llama.cpp's vocabulary-only GGUFs and tokenizes exactly as llama.cpp's own test
// pairs (<vocab>.gguf.inp / .out) say: the link, the one-ggml build and the
// tokenizers the translation models use (Qwen2's byte-level BPE with CJK, GPT-2's
// byte split) all work.
#include <gtest/gtest.h>
#include <llama.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kModels = EARSHOT_LLAMA_MODELS_DIR;

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + separator.size())
    parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ModelDeleter {
  void operator()(llama_model* model) const { llama_model_free(model); }
};

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text) {
  std::vector<llama_token> tokens(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                         static_cast<int32_t>(tokens.size()), /*add_special=*/false, /*parse_special=*/false);
  if (n < 0) {
    tokens.resize(-n);
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), false, false);
  }
  tokens.resize(n);
  return tokens;
}

class LibllamaVocab : public testing::TestWithParam<std::string> {};

TEST_P(LibllamaVocab, TokenizesLlamaCppsOwnTestPairs) {
  const std::string base = kModels + "/" + GetParam();
  llama_backend_init();
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);  // its load chatter is not the test's
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  std::unique_ptr<llama_model, ModelDeleter> model(llama_model_load_from_file(base.c_str(), params));
  ASSERT_NE(model, nullptr) << "libllama could not load " << base;
  const llama_vocab* vocab = llama_model_get_vocab(model.get());

  // The .inp file separates inputs with this marker line; .out has one line of ids each.
  std::vector<std::string> inputs = split(read_file(base + ".inp"), "\n__ggml_vocab_test__\n");
  std::vector<std::string> outputs = split(read_file(base + ".out"), "\n");
  if (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  ASSERT_GE(inputs.size(), 20u);
  ASSERT_GE(outputs.size(), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<llama_token> expected;
    std::istringstream ids(outputs[i]);
    for (llama_token id; ids >> id;) expected.push_back(id);
    EXPECT_EQ(tokenize(vocab, inputs[i]), expected) << "input " << i << ": \"" << inputs[i] << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(PinnedVocabularies, LibllamaVocab,
                         testing::Values("ggml-vocab-qwen2.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(11, info.param.size() - 11 - 5);
                           for (char& c : name)
                             if (c == '-' || c == '.') c = '_';
                           return name;
                         });

}  // namespace

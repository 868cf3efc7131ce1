// Random-weight LLMs for the LLM backend tests, written once per test program
// into a temporary folder: hunyuan-dense with the Qwen2 vocabulary plus Hunyuan's
// control tokens, qwen3 with GPT-2's byte-level vocabulary (CJK splits into
// partial UTF-8 tokens).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/llm/random_llm.h"

namespace earshot::llm::testing {

inline std::filesystem::path llama_models_dir() { return EARSHOT_LLAMA_MODELS_DIR; }

inline RandomLlmSpec tiny_spec(const std::string& architecture) {
  RandomLlmSpec spec;
  spec.architecture = architecture;
  const bool hunyuan = architecture == "hunyuan-dense";
  spec.vocabulary = llama_models_dir() / (hunyuan ? "ggml-vocab-qwen2.gguf" : "ggml-vocab-gpt-2.gguf");
  spec.hunyuan_control_tokens = hunyuan;
  spec.n_embd = 64;
  spec.n_layer = 3;
  spec.n_head = 4;
  spec.n_head_kv = hunyuan ? 2 : 1;  // GQA and MQA
  spec.head_dim = 16;
  spec.n_ff = 96;
  spec.rms_eps = hunyuan ? 1e-5f : 1e-6f;
  spec.rope_freq_base = hunyuan ? 10000.0f : 1000000.0f;
  spec.seed = hunyuan ? 7 : 11;
  return spec;
}

// The folder (removed at exit) and the file, written on first use.
inline std::filesystem::path tiny_model(const std::string& architecture) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("earshot-llm-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static struct Cleanup {
      std::filesystem::path path;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
      }
    } cleanup{d};
    return d;
  }();
  const std::filesystem::path file = dir / (architecture + ".gguf");
  if (!std::filesystem::exists(file)) write_random_llm(tiny_spec(architecture), file);
  return file;
}

}  // namespace earshot::llm::testing

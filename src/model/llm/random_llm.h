// Random-weight decoder-only GGUFs that libllama loads as real models: the
// architectures translation models use (hunyuan-dense, qwen3), a real vocabulary
// grafted from one of llama.cpp's vocabulary-only GGUFs (plus Hunyuan's control
// tokens), weights scaled so greedy decoding does not collapse onto one token.
// For tests, the numpy reference and the benchmarks; there are no real weights.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace earshot::llm {

struct RandomLlmSpec {
  std::string architecture = "qwen3";   // "qwen3" or "hunyuan-dense"
  std::filesystem::path vocabulary;     // a GGUF holding tokenizer.ggml.* (llama.cpp's models/ggml-vocab-*.gguf)
  bool hunyuan_control_tokens = false;  // append hunyuan_control_tokens() to the vocabulary
  int n_embd = 64;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 16;
  int n_ff = 128;
  int n_ctx_train = 4096;
  float rms_eps = 1e-6f;
  float rope_freq_base = 10000.0f;
  ggml_type weight_type = GGML_TYPE_F32;  // matrices; norm weights stay F32
  uint64_t seed = 1;
  // Token embedding scale against the layers' output: small enough that the
  // tied head does not just echo the current token.
  float embedding_std = 0.05f;
  std::string name = "earshot-random-llm";

  // Hy-MT2-1.8B's dimensions (d 2048, 32 layers, 16 heads x 128, 4 KV heads, FFN 6144).
  static RandomLlmSpec hy_mt2_1_8b(std::filesystem::path vocabulary);
};

// Hunyuan's control tokens as the generator appends them, in order (the
// placeholder `<｜hy_place▁holder▁no▁2｜>` among them, as Hy-MT2 emits it).
const std::vector<std::string>& hunyuan_control_tokens();

// Writes the model atomically. Throws earshot::Error: kInvalidArgument for an
// unsupported architecture or inconsistent dimensions, what GgufFile::open
// throws for the vocabulary file, kIo when the output cannot be written.
void write_random_llm(const RandomLlmSpec& spec, const std::filesystem::path& out);

}  // namespace earshot::llm

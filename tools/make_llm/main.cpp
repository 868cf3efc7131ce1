// earshot-make-llm: writes a random-weight decoder-only GGUF (hunyuan-dense or
// qwen3) with a real vocabulary grafted from a vocabulary-only GGUF.
//   earshot-make-llm --arch hunyuan-dense --vocab third_party/src/llama.cpp/models/ggml-vocab-qwen2.gguf
//       --out FILE [--seed N] [--type f32|f16|bf16|q8_0|q4_0] [--hunyuan-tokens 0|1]
//       [--n-embd N --n-layer N --n-head N --n-head-kv N --head-dim N --n-ff N --embedding-std X]
//       [--shape hy-mt2-1.8b]   (Hy-MT2-1.8B's dimensions; f16 unless --type says otherwise)
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "common/error.h"
#include "model/llm/random_llm.h"
#include "tools/common/tool_args.h"

namespace {

constexpr char kUsage[] =
    "usage: earshot-make-llm --arch hunyuan-dense|qwen3 --vocab VOCAB.gguf --out FILE [--seed N]\n"
    "         [--type f32|f16|bf16|q8_0|q4_0] [--hunyuan-tokens 0|1] [--shape hy-mt2-1.8b]\n"
    "         [--n-embd N] [--n-layer N] [--n-head N] [--n-head-kv N] [--head-dim N] [--n-ff N]\n"
    "         [--embedding-std X]\n";

ggml_type parse_type(const std::string& name) {
  if (name == "f32") return GGML_TYPE_F32;
  if (name == "f16") return GGML_TYPE_F16;
  if (name == "bf16") return GGML_TYPE_BF16;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  if (name == "q4_0") return GGML_TYPE_Q4_0;
  throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--type " + name + " (f32, f16, bf16, q8_0 or q4_0)");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    earshot::llm::RandomLlmSpec spec;
    std::string out, arch, type, vocab, shape, hunyuan_tokens;
    std::map<std::string, earshot::tools::OptionSetter> options = {
        {"--arch", [&](const std::string& v) { arch = v; }},
        {"--vocab", [&](const std::string& v) { vocab = v; }},
        {"--out", [&](const std::string& v) { out = v; }},
        {"--type", [&](const std::string& v) { type = v; }},
        {"--shape", [&](const std::string& v) { shape = v; }},
        {"--hunyuan-tokens", [&](const std::string& v) { hunyuan_tokens = v; }},
        {"--seed", [&](const std::string& v) { spec.seed = std::stoull(v); }},
        {"--n-embd", [&](const std::string& v) { spec.n_embd = std::stoi(v); }},
        {"--n-layer", [&](const std::string& v) { spec.n_layer = std::stoi(v); }},
        {"--n-head", [&](const std::string& v) { spec.n_head = std::stoi(v); }},
        {"--n-head-kv", [&](const std::string& v) { spec.n_head_kv = std::stoi(v); }},
        {"--head-dim", [&](const std::string& v) { spec.head_dim = std::stoi(v); }},
        {"--n-ff", [&](const std::string& v) { spec.n_ff = std::stoi(v); }},
        {"--embedding-std", [&](const std::string& v) { spec.embedding_std = std::stof(v); }},
    };
    earshot::tools::parse_options(argc, argv, kUsage, options);
    if (out.empty() || vocab.empty()) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    if (shape == "hy-mt2-1.8b") {
      const uint64_t seed = spec.seed;
      spec = earshot::llm::RandomLlmSpec::hy_mt2_1_8b(vocab);
      spec.seed = seed;
    } else if (!shape.empty()) {
      throw earshot::Error(earshot::ErrorCode::kInvalidArgument, "--shape " + shape + " (hy-mt2-1.8b)");
    }
    spec.vocabulary = vocab;
    if (!arch.empty()) spec.architecture = arch;
    spec.hunyuan_control_tokens = hunyuan_tokens.empty() ? spec.architecture == "hunyuan-dense" : hunyuan_tokens == "1";
    if (spec.architecture == "hunyuan-dense") spec.rms_eps = 1e-5f;
    if (!type.empty()) spec.weight_type = parse_type(type);
    earshot::llm::write_random_llm(spec, out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-make-llm: %s\n", e.what());
    return 1;
  }
}

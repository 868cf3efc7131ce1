// The Qwen3-ASR family's published files: ggml-org's GGUF pairs.
#include "engine/qwen3asr/registration.h"

namespace earshot::engine {

// ggml-org's Qwen3-ASR-{0.6B,1.7B}-GGUF as llama.cpp converts them: Q8_0 text model
// (arch qwen3vl) and mmproj (projector qwen3a); the file names as published
// projects download them. No SHA-1 is known for them: pulls verify the server's
// Content-Length and that both files are GGUF, not a hash. Sizes approximate.
std::vector<models::ModelInfo> qwen3asr_catalogue() {
  constexpr uint64_t kMiB = 1024 * 1024;
  const std::string hf = "https://huggingface.co/ggml-org";
  std::vector<models::ModelInfo> out = {
      {"qwen3-asr-0.6b", 850 * kMiB, "", hf + "/Qwen3-ASR-0.6B-GGUF/resolve/main", "Qwen3-ASR-0.6B-Q8_0.gguf",
       "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf"},
      {"qwen3-asr-1.7b", 2200 * kMiB, "", hf + "/Qwen3-ASR-1.7B-GGUF/resolve/main", "Qwen3-ASR-1.7B-Q8_0.gguf",
       "mmproj-Qwen3-ASR-1.7B-Q8_0.gguf"},
  };
  for (models::ModelInfo& m : out) m.check = models::check_gguf_llm_header;
  return out;
}

}  // namespace earshot::engine

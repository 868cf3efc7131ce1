// The translation stage's published models: Tencent's Hy-MT2 GGUFs.
#include "stages/translation/options.h"

namespace earshot::stages::translation {

// Tencent's GGUF repositories for Hy-MT2-1.8B. The Q4_K_M and 2-bit file names are
// as their Hugging Face pages show them; Q8_0 follows the same pattern, unverified.
// Sizes are approximate (1.8B parameters). No SHA-1 is published: a pull checks the
// size and that the file is a GGUF naming an architecture.
std::vector<models::ModelInfo> translation_catalogue() {
  constexpr uint64_t kMiB = 1024 * 1024;
  const std::string hf = "https://huggingface.co/tencent/";
  std::vector<models::ModelInfo> out = {
      {"hy-mt2-1.8b-q4_k_m", 1100 * kMiB, "", hf + "Hy-MT2-1.8B-GGUF/resolve/main", "Hy-MT2-1.8B-Q4_K_M.gguf"},
      {"hy-mt2-1.8b-q8_0", 1900 * kMiB, "", hf + "Hy-MT2-1.8B-GGUF/resolve/main", "Hy-MT2-1.8B-Q8_0.gguf"},
      {"hy-mt2-1.8b-2bit", 600 * kMiB, "", hf + "Hy-MT2-1.8B-2Bit-GGUF/resolve/main", "Hy-MT2-1.8B-2Bit.gguf"},
  };
  for (models::ModelInfo& m : out) m.check = models::check_gguf_llm_header;
  return out;
}

}  // namespace earshot::stages::translation

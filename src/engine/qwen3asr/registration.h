// The Qwen3-ASR family on the family registry (engine/families.cpp): a qwen3vl
// GGUF and its mmproj, its options (--mmproj, --alignment-heads-file,
// --qwen3-mel-frames, --qwen3-reuse, --qwen3-quantized-products), the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family qwen3asr_family();
// The files of the family published under a name (`earshot pull NAME`; catalogue.cpp).
std::vector<models::ModelInfo> qwen3asr_catalogue();

}  // namespace earshot::engine

// The Whisper family on the family registry (engine/families.cpp): whisper.cpp's
// ggml .bin files, bench's --encoder-input, the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family whisper_family();
// The files of the family published under a name (`earshot pull NAME`; catalogue.cpp).
std::vector<models::ModelInfo> whisper_catalogue();

}  // namespace earshot::engine

// The Whisper family on the family registry (engine/families.cpp): whisper.cpp's
// ggml .bin files, bench's --encoder-input, the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family whisper_family();

}  // namespace earshot::engine

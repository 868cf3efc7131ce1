// The transducer family on the family registry (engine/families.cpp):
// FastConformer-TDT/RNN-T files (whisper.cpp's Parakeet .bin, GGUF), a streaming
// model's --lookahead-ms, the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family transducer_family();

}  // namespace earshot::engine

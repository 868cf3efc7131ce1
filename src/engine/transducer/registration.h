// The transducer family on the family registry (engine/families.cpp):
// FastConformer-TDT/RNN-T files (whisper.cpp's Parakeet .bin, GGUF), a streaming
// model's --lookahead-ms, the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family transducer_family();
// The files of the family published under a name (`earshot pull NAME`; catalogue.cpp).
std::vector<models::ModelInfo> transducer_catalogue();

}  // namespace earshot::engine

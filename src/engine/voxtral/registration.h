// The Voxtral Realtime family on the family registry (engine/families.cpp):
// transcribe.cpp's GGUF layout (general.architecture voxtral_realtime), --delay-ms,
// the loader.
#pragma once

#include "engine/families.h"

namespace earshot::engine {

Family voxtral_family();
// The files of the family published under a name (`earshot pull NAME`; catalogue.cpp).
std::vector<models::ModelInfo> voxtral_catalogue();

}  // namespace earshot::engine

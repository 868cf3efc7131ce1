// The Voxtral Realtime family's published files: transcribe.cpp's GGUFs.
#include <string>
#include <utility>

#include "common/error.h"
#include "engine/voxtral/registration.h"
#include "model/runtime/gguf_file.h"
#include "model/voxtral/model.h"

namespace earshot::engine {

namespace {

// A downloaded file must be a GGUF of this family's architecture (the layout
// voxtral::Model::load reads), not an error page or another model.
void check_voxtral_gguf(const std::filesystem::path& path) {
  const runtime::GgufFile file = runtime::GgufFile::open(path);
  if (file.architecture() != voxtral::kGgufArchitecture)
    throw Error(ErrorCode::kInvalidModel, path.string() + ": not a Voxtral Realtime GGUF (architecture '" +
                                              file.architecture() + "', expected '" + voxtral::kGgufArchitecture +
                                              "')");
}

}  // namespace

// Mistral's Voxtral-Mini-4B-Realtime-2602 as transcribe.cpp publishes it
// (docs/models/voxtral-realtime.md): handy-computer/Voxtral-Mini-4B-Realtime-2602-GGUF,
// Voxtral-Mini-4B-Realtime-2602-TYPE.gguf, the sizes it states (decimal GB). It
// states no hashes: pulls verify Content-Length and the GGUF's architecture.
std::vector<models::ModelInfo> voxtral_catalogue() {
  constexpr uint64_t kMB = 1000 * 1000;
  const std::string model = "Voxtral-Mini-4B-Realtime-2602";
  const std::pair<const char*, uint64_t> published[] = {{"BF16", 8870}, {"F16", 8880},    {"Q8_0", 4730},
                                                        {"Q6_K", 3660}, {"Q5_K_M", 3280}, {"Q4_K_M", 2830}};
  std::vector<models::ModelInfo> out;
  for (const auto& [type, mb] : published)
    out.push_back(models::transcribe_cpp_file(model, type, mb * kMB, check_voxtral_gguf, "-GGUF"));
  return out;
}

}  // namespace earshot::engine

// The diarization stage's published models (transcribe.cpp's streaming
// Sortformer GGUFs), and what a Sortformer file is.
#include <string>
#include <utility>

#include "model/sortformer/model.h"
#include "stages/diarization/sortformer/sortformer_source.h"

namespace earshot::stages::diarization {

// transcribe.cpp's Sortformer diarizer GGUFs, as its
// docs/models/diar_streaming_sortformer_4spk-v2.1.md lists them (F32, F16, Q8_0
// only: it withdrew the k-quants, which flip speaker-cache decisions), in
// handy-computer/diar_streaming_sortformer_4spk-v2.1-gguf, the sizes it states.
// No hashes published: pulls verify Content-Length and the GGUF layout.
std::vector<models::ModelInfo> sortformer_catalogue() {
  constexpr uint64_t kMB = 1000 * 1000;
  const std::string model = "diar_streaming_sortformer_4spk-v2.1";
  const std::pair<const char*, uint64_t> published[] = {{"F32", 471}, {"F16", 237}, {"Q8_0", 139}};
  std::vector<models::ModelInfo> out;
  for (const auto& [type, mb] : published)
    out.push_back(models::transcribe_cpp_file(model, type, mb * kMB, models::check_sortformer_header));
  return out;
}

std::optional<quantize::FileSummary> sortformer_file_summary(const runtime::ModelFileProbe& file,
                                                             const std::filesystem::path& path) {
  const bool ours = file.kind == runtime::ModelFileKind::kGguf && file.architecture == sortformer::kGgufArchitecture;
  if (!ours && file.published != runtime::PublishedLayout::kTranscribeCppSortformer) return std::nullopt;
  return quantize::FileSummary{"Sortformer diarization", ours ? "earshot GGUF" : file.description.substr(2),
                               quantize::gguf_matrix_types(path)};
}

}  // namespace earshot::stages::diarization

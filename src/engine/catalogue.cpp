#include "engine/catalogue.h"

#include "engine/families.h"

namespace earshot::engine {

std::vector<models::ModelInfo> known_models() {
  std::vector<models::ModelInfo> all;
  for (const Family& f : families()) {
    if (!f.catalogue) continue;
    for (models::ModelInfo& m : f.catalogue()) all.push_back(std::move(m));
  }
  return all;
}

std::optional<models::ModelInfo> find_model(std::string_view name) {
  const std::vector<models::ModelInfo> all = known_models();
  if (const models::ModelInfo* m = models::find_model(all, name)) return *m;
  return std::nullopt;
}

std::filesystem::path resolve_model(const std::string& name_or_path, const std::filesystem::path& cache_dir) {
  return models::resolve_model(name_or_path, known_models(), cache_dir);
}

}  // namespace earshot::engine

// The published model files --model takes by name, for `earshot pull NAME`,
// `--model NAME` and `earshot models`: every family's catalogue
// (Family::catalogue) in registry order. A family's entries come with it: adding
// a family adds its names, and nothing here names one. (The stages' models are
// in their own records: stages::StageDefinition::catalogue.)
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/registry.h"

namespace earshot::engine {

// Every family's catalogue, in registry order.
std::vector<models::ModelInfo> known_models();
// The entry called `name` (its name, an alias or its file's name); nullopt when none is.
std::optional<models::ModelInfo> find_model(std::string_view name);
// A --model argument to a file (models::resolve_model over known_models()).
std::filesystem::path resolve_model(const std::string& name_or_path,
                                    const std::filesystem::path& cache_dir = models::default_cache_dir());

}  // namespace earshot::engine

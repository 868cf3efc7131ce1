// Which model family reads a file, decided from the file itself (legacy ggml
// magic, GGUF general.architecture), and the registry of families. The built-in
// families are registered on first use; tests register fakes of their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_spec.h"
#include "model/runtime/model_file.h"

namespace earshot::engine {

// What a file is (kind, GGUF architecture, a description for errors): runtime::probe_model_file.
using ModelFile = runtime::ModelFileProbe;
using runtime::ModelFileKind;
using runtime::probe_model_file;

struct Family {
  std::string name;                               // "whisper"
  std::function<bool(const ModelFile&)> accepts;  // whether this family reads the file
  std::function<std::shared_ptr<const Engine>(const ModelSpec&)> load;
};

// Adds a family; a later registration with the same name replaces the earlier.
void register_family(Family family);
std::vector<std::string> family_names();
// The name of the first family that reads the file at `path` ("" when none does);
// reads only what probe_model_file reads (a header), never the weights.
std::string family_of(const std::filesystem::path& path);

// Loads spec.path with the first family that accepts it. Throws
// earshot::Error(kInvalidArgument) for spec.runtime.threads < 1 (before reading
// the file), Error(kUnsupported) naming what the file is when no family reads it,
// and the family's own errors (kInvalidModel, kIo) otherwise.
std::shared_ptr<const Engine> load(const ModelSpec& spec);

}  // namespace earshot::engine

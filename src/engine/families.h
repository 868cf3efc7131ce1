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

namespace earshot::engine {

struct ModelFile {
  enum class Format { kLegacyGgml, kGguf, kOther };
  std::filesystem::path path;
  Format format = Format::kOther;
  std::string architecture;  // GGUF general.architecture ("" when absent or not GGUF)
  std::string description;   // what the file looks like, for errors ("a GGUF file of architecture 'llama'")
};

// Reads just enough of the file to say what it is. Throws earshot::Error(kIo)
// when it cannot be opened.
ModelFile probe_model_file(const std::filesystem::path& path);

struct Family {
  std::string name;                               // "whisper"
  std::function<bool(const ModelFile&)> accepts;  // whether this family reads the file
  std::function<std::shared_ptr<const Engine>(const ModelSpec&)> load;
};

// Adds a family; a later registration with the same name replaces the earlier.
void register_family(Family family);
std::vector<std::string> family_names();

// Loads spec.path with the first family that accepts it. Throws
// earshot::Error(kUnsupported) naming what the file is when none does, and the
// family's own errors (kInvalidModel, kIo) otherwise.
std::shared_ptr<const Engine> load(const ModelSpec& spec);

}  // namespace earshot::engine

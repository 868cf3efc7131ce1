#include "engine/families.h"

#include <gguf.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "common/error.h"
#include "engine/whisper_engine.h"

namespace earshot::engine {

namespace {

constexpr uint32_t kLegacyGgmlMagic = 0x67676d6c;  // "ggml" read little-endian, whisper.cpp's .bin files

std::string first_bytes_description(const std::string& head, uint64_t size) {
  if (size == 0) return "an empty file";
  if (head.rfind("<!DOCTYPE", 0) == 0 || head.rfind("<html", 0) == 0 || head.rfind("<HTML", 0) == 0)
    return "an HTML page (a failed download?)";
  if (head.rfind("PK\x03\x04", 0) == 0) return "a zip archive (a PyTorch checkpoint?)";
  if (head.size() > 262 && head.compare(257, 5, "ustar") == 0) return "a tar archive (a .nemo file?)";
  if (head.size() > 8 && head[8] == '{') return "a safetensors file";
  char hex[64];
  std::snprintf(hex, sizeof hex, "first bytes %02x %02x %02x %02x", head.size() > 0 ? head[0] & 0xff : 0,
                head.size() > 1 ? head[1] & 0xff : 0, head.size() > 2 ? head[2] & 0xff : 0,
                head.size() > 3 ? head[3] & 0xff : 0);
  return std::string("not a model file (") + hex + ")";
}

struct Registry {
  std::mutex mutex;
  std::vector<Family> families;
  bool builtins = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The built-in families, added once before the first lookup (tests may add theirs before or after).
void add_builtins_locked(Registry& r) {
  if (r.builtins) return;
  r.builtins = true;
  r.families.insert(r.families.begin(),
                    Family{"whisper", [](const ModelFile& f) { return f.format == ModelFile::Format::kLegacyGgml; },
                           [](const ModelSpec& spec) { return load_whisper_engine(spec); }});
}

}  // namespace

ModelFile probe_model_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::kIo, "model " + path.string() + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open model file " + path.string());
  std::string head(512, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const uint64_t size = std::filesystem::file_size(path, ec);

  ModelFile file;
  file.path = path;
  uint32_t magic = 0;
  if (head.size() >= 4) {
    magic = static_cast<uint32_t>(static_cast<unsigned char>(head[0])) |
            static_cast<uint32_t>(static_cast<unsigned char>(head[1])) << 8 |
            static_cast<uint32_t>(static_cast<unsigned char>(head[2])) << 16 |
            static_cast<uint32_t>(static_cast<unsigned char>(head[3])) << 24;
  }
  if (magic == kLegacyGgmlMagic) {
    file.format = ModelFile::Format::kLegacyGgml;
    file.description = "a legacy ggml model file";
  } else if (head.rfind("GGUF", 0) == 0) {
    file.format = ModelFile::Format::kGguf;
    gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
    if (gguf_context* ctx = gguf_init_from_file(path.string().c_str(), params)) {
      const int64_t key = gguf_find_key(ctx, "general.architecture");
      if (key >= 0 && gguf_get_kv_type(ctx, key) == GGUF_TYPE_STRING) file.architecture = gguf_get_val_str(ctx, key);
      gguf_free(ctx);
      file.description = file.architecture.empty() ? "a GGUF file without general.architecture"
                                                   : "a GGUF file of architecture '" + file.architecture + "'";
    } else {
      file.description = "a GGUF file that ggml cannot read (truncated or corrupt)";
    }
  } else {
    file.description = first_bytes_description(head, size);
  }
  return file;
}

void register_family(Family family) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_builtins_locked(r);
  auto same =
      std::find_if(r.families.begin(), r.families.end(), [&](const Family& f) { return f.name == family.name; });
  if (same != r.families.end()) {
    *same = std::move(family);
  } else {
    r.families.push_back(std::move(family));
  }
}

std::vector<std::string> family_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_builtins_locked(r);
  std::vector<std::string> names;
  for (const Family& f : r.families) names.push_back(f.name);
  return names;
}

std::shared_ptr<const Engine> load(const ModelSpec& spec) {
  const ModelFile file = probe_model_file(spec.path);
  std::function<std::shared_ptr<const Engine>(const ModelSpec&)> loader;
  std::string names;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    add_builtins_locked(r);
    for (const Family& f : r.families) {
      names += (names.empty() ? "" : ", ") + f.name;
      if (!loader && f.accepts(file)) loader = f.load;
    }
  }
  if (!loader) {
    throw Error(ErrorCode::kUnsupported, "model file " + spec.path.string() + " is " + file.description +
                                             ", which no model family of this build reads (families: " + names +
                                             "; Whisper models are whisper.cpp's ggml .bin files)");
  }
  return loader(spec);
}

}  // namespace earshot::engine

#include "engine/families.h"

#include <algorithm>
#include <mutex>

#include "common/error.h"
#include "engine/qwen3asr_engine.h"
#include "engine/transducer_engine.h"
#include "engine/whisper_engine.h"

namespace earshot::engine {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<Family> families;
  bool builtins = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

// --lookahead-ms is a cache-aware streaming transducer's chunk; a family
// without one refuses it rather than ignore what the user asked for.
void refuse_lookahead(const ModelSpec& spec, const char* what) {
  if (spec.transducer.lookahead_ms == 0) return;
  throw Error(ErrorCode::kInvalidArgument,
              "--lookahead-ms " + std::to_string(spec.transducer.lookahead_ms) +
                  " applies to cache-aware streaming transducers only (family transducer: Nemotron streaming "
                  "files); model file " +
                  spec.path.string() + " is " + what + ", which has no lookahead: leave --lookahead-ms out");
}

// The built-in families, added once before the first lookup (tests may add theirs before or after).
void add_builtins_locked(Registry& r) {
  if (r.builtins) return;
  r.builtins = true;
  r.families.insert(r.families.begin(),
                    {Family{"whisper", [](const ModelFile& f) { return f.kind == ModelFileKind::kGgmlWhisper; },
                            [](const ModelSpec& spec) {
                              refuse_lookahead(spec, "a Whisper model (family whisper)");
                              return load_whisper_engine(spec);
                            }},
                     Family{"transducer", fastconformer::reads_model_file,
                            [](const ModelSpec& spec) { return load_transducer_engine(spec); }},
                     // Qwen3-ASR's text model; an mmproj given as --model is taken too so the
                     // loader can say which flag it belongs to.
                     Family{"qwen3asr",
                            [](const ModelFile& f) {
                              return f.kind == ModelFileKind::kGguf &&
                                     (f.architecture == "qwen3vl" || f.architecture == "clip");
                            },
                            [](const ModelSpec& spec) {
                              refuse_lookahead(spec, "a Qwen3-ASR model (family qwen3asr)");
                              return load_qwen3asr_engine(spec);
                            }}});
}

}  // namespace

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

std::string family_of(const std::filesystem::path& path) {
  const ModelFile file = probe_model_file(path);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_builtins_locked(r);
  for (const Family& f : r.families)
    if (f.accepts(file)) return f.name;
  return "";
}

std::shared_ptr<const Engine> load(const ModelSpec& spec) {
  // The runtime options every family shares, checked once, before any file is read.
  if (spec.runtime.threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
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
    throw Error(ErrorCode::kUnsupported,
                "model file " + spec.path.string() + " is " + file.description +
                    ", which no model family of this build reads (families: " + names +
                    "; Whisper and Parakeet models are whisper.cpp's ggml .bin files, Qwen3-ASR a qwen3vl GGUF + "
                    "its mmproj)");
  }
  return loader(spec);
}

}  // namespace earshot::engine

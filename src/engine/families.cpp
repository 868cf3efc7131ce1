#include "engine/families.h"

#include <algorithm>
#include <mutex>

#include "common/error.h"
#include "engine/qwen3asr/registration.h"
#include "engine/transducer/registration.h"
#include "engine/voxtral/registration.h"
#include "engine/whisper/registration.h"

namespace earshot::engine {

namespace {

// The built-in families, one line each, in the order files are tried and options
// and policies are listed.
std::vector<Family> builtin_families() {
  return {whisper_family(), qwen3asr_family(), transducer_family(), voxtral_family()};
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
  std::vector<Family> all = builtin_families();
  for (Family& f : r.families) all.push_back(std::move(f));
  r.families = std::move(all);
}

std::string file_is(const Family& f) {
  return (f.display_name.empty() ? "a model" : "a " + f.display_name + " model") + " (family " + f.name + ")";
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
  std::vector<std::string> names;
  for (const Family& f : families()) names.push_back(f.name);
  return names;
}

std::vector<Family> families() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_builtins_locked(r);
  return r.families;
}

std::string family_of(const std::filesystem::path& path) {
  const ModelFile file = probe_model_file(path);
  for (const Family& f : families())
    if (f.accepts(file)) return f.name;
  return "";
}

std::shared_ptr<const Engine> load(const ModelSpec& spec) {
  // The runtime options every family shares, checked once, before any file is read.
  if (spec.runtime.threads < 1) throw Error(ErrorCode::kInvalidArgument, "--threads must be >= 1");
  const ModelFile file = probe_model_file(spec.path);
  const std::vector<Family> all = families();
  const auto family = std::find_if(all.begin(), all.end(), [&](const Family& f) { return f.accepts(file); });
  if (family == all.end()) {
    std::string names;
    for (const Family& f : all) names += (names.empty() ? "" : ", ") + f.name;
    throw Error(ErrorCode::kUnsupported,
                "model file " + spec.path.string() + " is " + file.description +
                    ", which no model family of this build reads (families: " + names +
                    "; Whisper and Parakeet models are whisper.cpp's ggml .bin files, Qwen3-ASR a qwen3vl GGUF + "
                    "its mmproj)");
  }
  // Another family's settings this one cannot honour are refused, not ignored.
  for (const Family& other : all) {
    if (other.name == family->name || !other.foreign_request) continue;
    if (const std::string problem = other.foreign_request(spec, file_is(*family)); !problem.empty())
      throw Error(ErrorCode::kInvalidArgument, problem);
  }
  std::shared_ptr<const Engine> engine = family->load(spec);
  // A family that batches took --batch-decode (and checked its range); one that
  // does not would run the streams the serve plan gives it each on every core.
  if (spec.runtime.batch_streams != 0 && engine->capabilities().batch_streams == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "--batch-decode " + std::to_string(spec.runtime.batch_streams) + ": model file " + spec.path.string() +
                    " is " + file_is(*family) +
                    ", which runs each stream's steps alone (Whisper, cache-aware streaming transducers, "
                    "Qwen3-ASR and Voxtral batch them): leave --batch-decode out");
  }
  return engine;
}

std::string describe(const std::string& family, const ModelSpec& spec, const std::string& policy) {
  for (const Family& f : families())
    if (f.name == family && f.describe) return f.describe(spec, policy);
  return "";
}

}  // namespace earshot::engine

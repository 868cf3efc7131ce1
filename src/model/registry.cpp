#include "model/registry.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"

namespace earshot::models {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A model argument that names an existing file: that path; nullopt when nothing is
// there (the caller tries it as a name); Error(kInvalidArgument, directory_error)
// for a directory.
std::optional<std::filesystem::path> existing_file(const std::string& name_or_path,
                                                   const std::string& directory_error) {
  std::error_code ec;
  const std::filesystem::path path(name_or_path);
  if (name_or_path.empty() || !std::filesystem::exists(path, ec)) return std::nullopt;
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kInvalidArgument, directory_error);
  return path;
}

std::string strip_slashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const ModelInfo* find_model(std::span<const ModelInfo> catalogue, std::string_view name) {
  if (name.empty()) return nullptr;
  const std::string key = lower(name);
  for (const ModelInfo& m : catalogue) {
    if (lower(m.name) == key || lower(model_file_name(m)) == key) return &m;
    for (const std::string& alias : m.aliases)
      if (lower(alias) == key) return &m;
  }
  return nullptr;
}

std::string model_names(std::span<const ModelInfo> catalogue) {
  std::string names;
  for (const ModelInfo& m : catalogue) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

ModelInfo transcribe_cpp_file(const std::string& model, const std::string& type, uint64_t bytes, FileCheck check,
                              const std::string& repository_suffix) {
  ModelInfo m{lower("transcribe.cpp/" + model + "-" + type), bytes, "",
              std::string(kTranscribeCppBaseUrl) + "/" + model + repository_suffix + "/resolve/main",
              model + "-" + type + ".gguf"};
  m.check = std::move(check);
  return m;
}

std::string model_file_name(const ModelInfo& model) {
  return model.file.empty() ? "ggml-" + model.name + ".bin" : model.file;
}

namespace {
std::string url_of(const ModelInfo& model, const std::optional<std::string>& base_url, const std::string& file) {
  std::string base = base_url ? *base_url : env("EARSHOT_MODEL_BASE_URL");
  if (base.empty()) base = model.repository;
  return strip_slashes(base) + "/" + file;
}
}  // namespace

std::string model_url(const ModelInfo& model, const std::optional<std::string>& base_url) {
  return url_of(model, base_url, model_file_name(model));
}

std::string mmproj_url(const ModelInfo& model, const std::optional<std::string>& base_url) {
  return model.mmproj.empty() ? "" : url_of(model, base_url, model.mmproj);
}

std::filesystem::path default_cache_dir() {
  if (std::string dir = env("EARSHOT_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "earshot" / "models";
  if (std::string home = env("HOME"); !home.empty())
    return std::filesystem::path(home) / ".cache" / "earshot" / "models";
  throw Error(ErrorCode::kIo, "cannot choose a model cache folder: set EARSHOT_CACHE_DIR (HOME is not set)");
}

std::filesystem::path cached_model_path(const ModelInfo& model, const std::filesystem::path& cache_dir) {
  return cache_dir / model_file_name(model);
}

std::filesystem::path cached_mmproj_path(const ModelInfo& model, const std::filesystem::path& cache_dir) {
  return model.mmproj.empty() ? std::filesystem::path() : cache_dir / model.mmproj;
}

bool is_cached(const ModelInfo& model, const std::filesystem::path& cache_dir) {
  std::error_code ec;
  return std::filesystem::exists(cached_model_path(model, cache_dir), ec) &&
         (model.mmproj.empty() || std::filesystem::exists(cached_mmproj_path(model, cache_dir), ec));
}

std::filesystem::path resolve_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                    const std::filesystem::path& cache_dir) {
  const std::filesystem::path as_path(name_or_path);
  if (const auto given =
          existing_file(name_or_path, "model '" + name_or_path + "' is a directory, not a ggml model file"))
    return *given;
  if (const ModelInfo* model = find_model(catalogue, name_or_path)) {
    const std::filesystem::path cached = cached_model_path(*model, cache_dir);
    if (is_cached(*model, cache_dir)) return cached;
    std::string by_hand = "download " + model_url(*model) + " by hand and place it at " + cached.string();
    if (!model->mmproj.empty()) {
      by_hand += ", and " + mmproj_url(*model) + " at " + cached_mmproj_path(*model, cache_dir).string();
    }
    throw Error(ErrorCode::kIo, "model '" + model->name + "' is not downloaded yet. Run `earshot pull " + model->name +
                                    "`, or " + by_hand + " (or give the file's path: /path/to/" +
                                    model_file_name(*model) + ")");
  }
  if (name_or_path.find('/') != std::string::npos || as_path.extension() == ".bin")
    throw Error(ErrorCode::kIo, "model file " + name_or_path + " does not exist");
  throw Error(ErrorCode::kInvalidArgument,
              "unknown model '" + name_or_path + "': give a path to a model file or one of: " + model_names(catalogue));
}

std::filesystem::path resolve_diarization_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                                const std::filesystem::path& cache_dir) {
  std::error_code ec;
  const std::filesystem::path as_path(name_or_path);
  if (const auto given = existing_file(name_or_path, "'" + name_or_path + "' is a directory, not a GGUF file"))
    return *given;
  std::string names;
  for (const ModelInfo& m : catalogue) {
    names += (names.empty() ? "" : ", ") + m.name;
    if (m.name != name_or_path && m.file != name_or_path) continue;
    const std::filesystem::path cached = cached_model_path(m, cache_dir);
    if (std::filesystem::exists(cached, ec)) return cached;
    throw Error(ErrorCode::kIo, "'" + m.name + "' is not downloaded yet. Run `earshot pull " + m.name +
                                    "`, or download " + model_url(m) + " by hand and place it at " + cached.string());
  }
  if (name_or_path.find('/') != std::string::npos || as_path.extension() == ".gguf")
    throw Error(ErrorCode::kIo, "no file at " + name_or_path);
  throw Error(ErrorCode::kInvalidArgument,
              "unknown diarization model '" + name_or_path + "': give a path to a GGUF file or one of: " + names);
}

void check_ggml_whisper_header(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, name + ": cannot open");
  const auto file_size = std::filesystem::file_size(path);
  auto bad = [&](const std::string& what) {
    return Error(ErrorCode::kInvalidModel, name + ": not a ggml Whisper model: " + what);
  };
  int32_t header[14];  // magic, 11 hyper-parameters, mel filter n_mel and n_fft
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (in.gcount() != sizeof header)
    throw bad("file is " + std::to_string(file_size) + " bytes, shorter than the " + std::to_string(sizeof header) +
              "-byte header");
  if (uint32_t(header[0]) != 0x67676d6cu) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", uint32_t(header[0]));
    throw bad(std::string("magic is ") + hex + ", expected 0x67676d6c ('ggml')");
  }
  static const char* const kNames[11] = {"n_vocab",       "n_audio_ctx", "n_audio_state", "n_audio_head",
                                         "n_audio_layer", "n_text_ctx",  "n_text_state",  "n_text_head",
                                         "n_text_layer",  "n_mels",      "ftype"};
  static const int32_t kMax[11] = {1 << 20, 1 << 16, 1 << 16, 1024, 1024, 1 << 16, 1 << 16, 1024, 1024, 1024, 100000};
  for (int i = 0; i < 11; ++i) {
    const int32_t v = header[1 + i];
    if (v < (i == 10 ? 0 : 1) || v > kMax[i])
      throw bad(std::string(kNames[i]) + " = " + std::to_string(v) + " is implausible");
  }
  if (header[3] % header[4] != 0 || header[7] % header[8] != 0)
    throw bad("state size is not a multiple of the head count");
  const int32_t n_mel = header[12], n_fft = header[13];
  if (n_mel != header[10] || n_fft < 1 || n_fft > 4096)
    throw bad("mel filter bank of " + std::to_string(n_mel) + " x " + std::to_string(n_fft) + " does not fit n_mels " +
              std::to_string(header[10]));
  const uint64_t needed = sizeof header + uint64_t(n_mel) * n_fft * 4;
  if (file_size < needed)
    throw bad("truncated inside the mel filter bank: " + std::to_string(file_size) + " bytes, at least " +
              std::to_string(needed) + " expected");
}

void check_ggml_parakeet_header(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, name + ": cannot open");
  int32_t header[18];  // magic, 15 hyper-parameters, the filter bank's n_mel and bin count
  in.read(reinterpret_cast<char*>(header), sizeof header);
  auto bad = [&](const std::string& what) {
    return Error(ErrorCode::kInvalidModel, name + ": not a ggml Parakeet model: " + what);
  };
  if (in.gcount() != sizeof header) throw bad("shorter than the " + std::to_string(sizeof header) + "-byte header");
  if (uint32_t(header[0]) != 0x67676d6cu) throw bad("no 'ggml' magic");
  const int32_t n_mels = header[6], n_fft = header[8];
  if (n_mels <= 0 || n_fft <= 1 || header[16] != n_mels || header[17] != n_fft / 2 + 1)
    throw bad("the filter bank header does not repeat n_mels " + std::to_string(n_mels) + " and n_fft/2+1");
}

std::filesystem::path resolve_translation_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                                const std::filesystem::path& cache_dir) {
  std::error_code ec;
  const std::filesystem::path as_path(name_or_path);
  if (const auto given =
          existing_file(name_or_path, "translation model '" + name_or_path + "' is a directory, not a GGUF file"))
    return *given;
  if (const ModelInfo* model = find_model(catalogue, name_or_path)) {
    const std::filesystem::path cached = cached_model_path(*model, cache_dir);
    if (std::filesystem::exists(cached, ec)) return cached;
    throw Error(ErrorCode::kIo, "translation model '" + model->name + "' is not downloaded yet. Run `earshot pull " +
                                    model->name + "`, or download " + model_url(*model) + " by hand and place it at " +
                                    cached.string());
  }
  if (name_or_path.find('/') != std::string::npos || as_path.extension() == ".gguf")
    throw Error(ErrorCode::kIo, "translation model file " + name_or_path + " does not exist");
  throw Error(ErrorCode::kInvalidArgument, "unknown translation model '" + name_or_path +
                                               "': give a path to a GGUF file or one of: " + model_names(catalogue));
}

void check_published_parakeet_header(const std::filesystem::path& path) {
  const runtime::GgufFile file = runtime::GgufFile::open(path);
  const runtime::PublishedLayout layout = runtime::published_layout(file);
  if (file.architecture() != "parakeet" ||
      (layout != runtime::PublishedLayout::kTranscribeCppParakeet && layout != runtime::PublishedLayout::kParakeetCpp))
    throw Error(ErrorCode::kInvalidModel,
                path.string() + ": not a published Parakeet GGUF (architecture '" + file.architecture() +
                    "', expected 'parakeet' with transcribe.cpp's stt.parakeet.* or parakeet.cpp's parakeet.* keys)");
}

void check_sortformer_header(const std::filesystem::path& path) {
  const runtime::GgufFile file = runtime::GgufFile::open(path);
  // "earshot-sortformer": sortformer::kGgufArchitecture (this library does not link the model).
  if (file.architecture() != "earshot-sortformer" &&
      runtime::published_layout(file) != runtime::PublishedLayout::kTranscribeCppSortformer)
    throw Error(ErrorCode::kInvalidModel,
                path.string() + ": not a Sortformer GGUF (architecture '" + file.architecture() +
                    "', expected transcribe.cpp's stt.sortformer.* keys or earshot's layout)");
}

void check_gguf_llm_header(const std::filesystem::path& path) {
  // GgufFile names what a foreign file looks like (an HTML error page, a ggml .bin...).
  const runtime::GgufFile file = runtime::GgufFile::open(path);
  if (file.architecture().empty())
    throw Error(ErrorCode::kInvalidModel, path.string() + ": a GGUF file without general.architecture, not an LLM");
}

}  // namespace earshot::models

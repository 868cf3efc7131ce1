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

constexpr uint64_t kMiB = 1024 * 1024;
const char* const kTinydiarizeBaseUrl = "https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main";

// Names as in whisper.cpp's models/download-ggml-model.sh; SHA-1s and the sizes of
// unquantised models from its models/README.md; quantised sizes are approximate.
std::vector<ModelInfo> make_registry() {
  const std::string hf = kDefaultBaseUrl;
  return {
      {"tiny", 75 * kMiB, "bd577a113a864445d4c299885e0cb97d4ba92b5f", hf},
      {"tiny.en", 75 * kMiB, "c78c86eb1a8faa21b369bcd33207cc90d64ae9df", hf},
      {"tiny-q5_1", 31 * kMiB, "", hf},
      {"tiny.en-q5_1", 31 * kMiB, "", hf},
      {"tiny-q8_0", 42 * kMiB, "", hf},
      {"base", 142 * kMiB, "465707469ff3a37a2b9b8d8f89f2f99de7299dac", hf},
      {"base.en", 142 * kMiB, "137c40403d78fd54d454da0f9bd998f78703390c", hf},
      {"base-q5_1", 57 * kMiB, "", hf},
      {"base.en-q5_1", 57 * kMiB, "", hf},
      {"base-q8_0", 78 * kMiB, "", hf},
      {"small", 466 * kMiB, "55356645c2b361a969dfd0ef2c5a50d530afd8d5", hf},
      {"small.en", 466 * kMiB, "db8a495a91d927739e50b3fc1cc4c6b8f6c2d022", hf},
      {"small.en-tdrz", 465 * kMiB, "b6c6e7e89af1a35c08e6de56b66ca6a02a2fdfa1", kTinydiarizeBaseUrl},
      {"small-q5_1", 181 * kMiB, "", hf},
      {"small.en-q5_1", 181 * kMiB, "", hf},
      {"small-q8_0", 252 * kMiB, "", hf},
      {"medium", 1536 * kMiB, "fd9727b6e1217c2f614f9b698455c4ffd82463b4", hf},
      {"medium.en", 1536 * kMiB, "8c30f0e44ce9560643ebd10bbe50cd20eafd3723", hf},
      {"medium-q5_0", 514 * kMiB, "", hf},
      {"medium.en-q5_0", 514 * kMiB, "", hf},
      {"medium-q8_0", 785 * kMiB, "", hf},
      {"large-v1", 2970 * kMiB, "b1caaf735c4cc1429223d5a74f0f4d0b9b59a299", hf},
      {"large-v2", 2970 * kMiB, "0f4c8e34f21cf1a914c59d8b3ce882345ad349d6", hf},
      {"large-v2-q5_0", 1126 * kMiB, "00e39f2196344e901b3a2bd5814807a769bd1630", hf},
      {"large-v2-q8_0", 1536 * kMiB, "", hf},
      {"large-v3", 2970 * kMiB, "ad82bf6a9043ceed055076d0fd39f5f186ff8062", hf},
      {"large-v3-q5_0", 1126 * kMiB, "e6e2ed78495d403bef4b7cff42ef4aaadcfea8de", hf},
      {"large-v3-turbo", 1536 * kMiB, "4af2b29d7ec73d781377bfd1758ca957a807e941", hf},
      {"large-v3-turbo-q5_0", 547 * kMiB, "e050f7970618a659205450ad97eb95a18d69c9ee", hf},
      {"large-v3-turbo-q8_0", 834 * kMiB, "", hf},
  };
}

// whisper.cpp's scripts/upload-parakeet.py names (ggml-parakeet-tdt-0.6b-v3-TYPE.bin);
// sizes approximate (0.6B parameters).
std::vector<ModelInfo> make_transducer_registry() {
  const std::string hf = kParakeetBaseUrl;
  return {
      {"parakeet-tdt-0.6b-v3-f32", 2400 * kMiB, "", hf, "parakeet"},
      {"parakeet-tdt-0.6b-v3-f16", 1250 * kMiB, "", hf, "parakeet"},
      {"parakeet-tdt-0.6b-v3-q8_0", 700 * kMiB, "", hf, "parakeet"},
      {"parakeet-tdt-0.6b-v3-q4_0", 420 * kMiB, "", hf, "parakeet"},
      {"parakeet-tdt-0.6b-v3-q4_k", 420 * kMiB, "", hf, "parakeet"},
  };
}

// transcribe.cpp's published GGUFs of the transducers earshot runs (Parakeet-TDT
// v2/v3: no linear biases; Nemotron streaming EN and 3.5: cache-aware RNN-T), as
// its docs/models/MODEL.md lists them (release 0.2.1): each in
// handy-computer/MODEL-gguf as MODEL-TYPE.gguf, the size it states (decimal GB/MB).
// It states no hashes: pulls verify Content-Length and the GGUF layout. Its RNN-T,
// CTC, 1.1B and unified models carry linear biases, a CTC head or
// chunked_limited_with_rc attention, which earshot refuses at load.
std::vector<ModelInfo> make_transcribe_cpp_registry() {
  constexpr uint64_t kMB = 1000 * 1000;
  struct Published {
    const char* model;
    uint64_t mb[6];  // F32, F16, Q8_0, Q6_K, Q5_K_M, Q4_K_M
  };
  const Published published[] = {
      {"parakeet-tdt-0.6b-v3", {2510, 1260, 740, 627, 565, 502}},
      {"parakeet-tdt-0.6b-v2", {2470, 1240, 730, 608, 547, 483}},
      {"nemotron-speech-streaming-en-0.6b", {2300, 1160, 696, 573, 514, 453}},
      {"nemotron-3.5-asr-streaming-0.6b", {2380, 1190, 716, 593, 534, 473}},
  };
  const char* types[6] = {"F32", "F16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M"};
  std::vector<ModelInfo> out;
  for (const Published& p : published) {
    for (int i = 0; i < 6; ++i) {
      std::string lower = types[i];
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.push_back({"transcribe.cpp/" + std::string(p.model) + "-" + lower, p.mb[i] * kMB, "",
                     std::string(kTranscribeCppBaseUrl) + "/" + p.model + "-gguf/resolve/main", "parakeet-gguf",
                     std::string(p.model) + "-" + types[i] + ".gguf"});
    }
  }
  return out;
}

// transcribe.cpp's Sortformer diarizer GGUFs, as its
// docs/models/diar_streaming_sortformer_4spk-v2.1.md lists them (F32, F16, Q8_0
// only: it withdrew the k-quants, which flip speaker-cache decisions), in
// handy-computer/diar_streaming_sortformer_4spk-v2.1-gguf, the sizes it states.
// No hashes published: pulls verify Content-Length and the GGUF layout.
std::vector<ModelInfo> make_diarization_registry() {
  constexpr uint64_t kMB = 1000 * 1000;
  const std::string model = "diar_streaming_sortformer_4spk-v2.1";
  const std::string repo = std::string(kTranscribeCppBaseUrl) + "/" + model + "-gguf/resolve/main";
  return {
      {"transcribe.cpp/" + model + "-f32", 471 * kMB, "", repo, "sortformer-gguf", model + "-F32.gguf"},
      {"transcribe.cpp/" + model + "-f16", 237 * kMB, "", repo, "sortformer-gguf", model + "-F16.gguf"},
      {"transcribe.cpp/" + model + "-q8_0", 139 * kMB, "", repo, "sortformer-gguf", model + "-Q8_0.gguf"},
  };
}

// ggml-org's Qwen3-ASR-{0.6B,1.7B}-GGUF as llama.cpp converts them: Q8_0 text model
// (arch qwen3vl) and mmproj (projector qwen3a); the file names as published
// projects download them. No SHA-1 is known for them: pulls verify the server's
// Content-Length and that both files are GGUF, not a hash. Sizes approximate.
std::vector<ModelInfo> make_qwen3asr_registry() {
  const std::string hf = kQwen3AsrBaseUrl;
  return {
      {"qwen3-asr-0.6b", 850 * kMiB, "", hf + "/Qwen3-ASR-0.6B-GGUF/resolve/main", "qwen3asr",
       "Qwen3-ASR-0.6B-Q8_0.gguf", "mmproj-Qwen3-ASR-0.6B-Q8_0.gguf"},
      {"qwen3-asr-1.7b", 2200 * kMiB, "", hf + "/Qwen3-ASR-1.7B-GGUF/resolve/main", "qwen3asr",
       "Qwen3-ASR-1.7B-Q8_0.gguf", "mmproj-Qwen3-ASR-1.7B-Q8_0.gguf"},
  };
}

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

}  // namespace

const std::vector<ModelInfo>& known_models() {
  static const std::vector<ModelInfo> registry = make_registry();
  return registry;
}

const std::vector<ModelInfo>& known_transducer_models() {
  static const std::vector<ModelInfo> registry = [] {
    std::vector<ModelInfo> all = make_transducer_registry();
    for (ModelInfo& m : make_transcribe_cpp_registry()) all.push_back(std::move(m));
    return all;
  }();
  return registry;
}

const std::vector<ModelInfo>& known_qwen3asr_models() {
  static const std::vector<ModelInfo> registry = make_qwen3asr_registry();
  return registry;
}

const std::vector<ModelInfo>& known_diarization_models() {
  static const std::vector<ModelInfo> registry = make_diarization_registry();
  return registry;
}

const ModelInfo* find_model(std::string_view name) {
  if (name.starts_with("ggml-") && name.ends_with(".bin")) name = name.substr(5, name.size() - 9);
  if (name == "parakeet-tdt-0.6b-v3") name = "parakeet-tdt-0.6b-v3-f16";
  for (const auto* list :
       {&known_models(), &known_transducer_models(), &known_qwen3asr_models(), &known_diarization_models()})
    for (const ModelInfo& m : *list)
      if (m.name == name || (!m.file.empty() && m.file == name)) return &m;
  return nullptr;
}

std::string known_model_names() {
  std::string names;
  for (const auto* list :
       {&known_models(), &known_transducer_models(), &known_qwen3asr_models(), &known_diarization_models()})
    for (const ModelInfo& m : *list) names += (names.empty() ? "" : ", ") + m.name;
  return names;
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

std::filesystem::path resolve_model(const std::string& name_or_path, const std::filesystem::path& cache_dir) {
  const std::filesystem::path as_path(name_or_path);
  if (const auto given =
          existing_file(name_or_path, "model '" + name_or_path + "' is a directory, not a ggml model file"))
    return *given;
  if (const ModelInfo* model = find_model(name_or_path)) {
    const std::filesystem::path cached = cached_model_path(*model, cache_dir);
    if (is_cached(*model, cache_dir)) return cached;
    std::string by_hand = "download " + model_url(*model) + " by hand and place it at " + cached.string();
    if (!model->mmproj.empty()) {
      by_hand += ", and " + mmproj_url(*model) + " at " + cached_mmproj_path(*model, cache_dir).string();
    }
    throw Error(ErrorCode::kIo, "model '" + model->name + "' is not downloaded yet. Run `earshot pull " + model->name +
                                    "`, or " + by_hand + " (or pass --model /path/to/" + model_file_name(*model) + ")");
  }
  if (name_or_path.find('/') != std::string::npos || as_path.extension() == ".bin")
    throw Error(ErrorCode::kIo, "model file " + name_or_path + " does not exist");
  throw Error(ErrorCode::kInvalidArgument, "unknown model '" + name_or_path +
                                               "': give a path to a ggml .bin file or one of: " + known_model_names());
}

std::filesystem::path resolve_diarization_model(const std::string& name_or_path,
                                                const std::filesystem::path& cache_dir) {
  std::error_code ec;
  const std::filesystem::path as_path(name_or_path);
  if (const auto given = existing_file(name_or_path, "'" + name_or_path + "' is a directory, not a GGUF file"))
    return *given;
  std::string names;
  for (const ModelInfo& m : known_diarization_models()) {
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

}  // namespace earshot::models

namespace earshot::models {

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

namespace {

// Tencent's GGUF repositories for Hy-MT2-1.8B. The Q4_K_M and 2-bit file names are
// as their Hugging Face pages show them; Q8_0 follows the same pattern, unverified.
// Sizes are approximate (1.8B parameters).
std::vector<LlmModelInfo> make_translation_registry() {
  return {
      {"hy-mt2-1.8b-q4_k_m", "tencent/Hy-MT2-1.8B-GGUF", "Hy-MT2-1.8B-Q4_K_M.gguf", 1100 * kMiB, true},
      {"hy-mt2-1.8b-q8_0", "tencent/Hy-MT2-1.8B-GGUF", "Hy-MT2-1.8B-Q8_0.gguf", 1900 * kMiB, false},
      {"hy-mt2-1.8b-2bit", "tencent/Hy-MT2-1.8B-2Bit-GGUF", "Hy-MT2-1.8B-2Bit.gguf", 600 * kMiB, true},
  };
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<LlmModelInfo>& known_translation_models() {
  static const std::vector<LlmModelInfo> registry = make_translation_registry();
  return registry;
}

const LlmModelInfo* find_translation_model(std::string_view name) {
  const std::string key = lower(name);
  for (const LlmModelInfo& m : known_translation_models())
    if (m.name == key || lower(m.file) == key) return &m;
  return nullptr;
}

std::string translation_model_url(const LlmModelInfo& model, const std::optional<std::string>& base_url) {
  const std::string base = base_url ? *base_url : env("EARSHOT_MODEL_BASE_URL");
  if (!base.empty()) return strip_slashes(base) + "/" + model.file;
  return "https://huggingface.co/" + model.repository + "/resolve/main/" + model.file;
}

std::filesystem::path cached_translation_model_path(const LlmModelInfo& model, const std::filesystem::path& cache_dir) {
  return cache_dir / model.file;
}

std::string known_translation_model_names() {
  std::string names;
  for (const LlmModelInfo& m : known_translation_models()) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

std::filesystem::path resolve_translation_model(const std::string& name_or_path,
                                                const std::filesystem::path& cache_dir) {
  std::error_code ec;
  const std::filesystem::path as_path(name_or_path);
  if (const auto given =
          existing_file(name_or_path, "translation model '" + name_or_path + "' is a directory, not a GGUF file"))
    return *given;
  if (const LlmModelInfo* model = find_translation_model(name_or_path)) {
    const std::filesystem::path cached = cached_translation_model_path(*model, cache_dir);
    if (std::filesystem::exists(cached, ec)) return cached;
    throw Error(ErrorCode::kIo, "translation model '" + model->name + "' is not downloaded yet. Run `earshot pull " +
                                    model->name + "`, or download " + translation_model_url(*model) +
                                    " by hand and place it at " + cached.string());
  }
  if (name_or_path.find('/') != std::string::npos || as_path.extension() == ".gguf")
    throw Error(ErrorCode::kIo, "translation model file " + name_or_path + " does not exist");
  throw Error(ErrorCode::kInvalidArgument,
              "unknown translation model '" + name_or_path +
                  "': give a path to a GGUF file or one of: " + known_translation_model_names());
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

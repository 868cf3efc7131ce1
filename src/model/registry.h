// Published model files by name: what an entry says (where a file is published,
// how it is checked), where it is cached, and how a `--model` argument (a name
// or a path) becomes a file. The speech families' entries are theirs
// (engine::Family::catalogue, gathered by engine/catalogue.h), the diarization
// and translation models' their stages' (stages::StageDefinition::catalogue).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::models {

// Throws earshot::Error(kInvalidModel) unless a downloaded file is what its entry
// publishes (a header check: magic, layout, architecture).
using FileCheck = std::function<void(const std::filesystem::path&)>;

struct ModelInfo {
  std::string name;         // e.g. "base.en", "large-v3-turbo-q5_0"
  uint64_t approx_bytes;    // for listings only; downloads verify the server's Content-Length
  std::string sha1;         // hex, from whisper.cpp's models/README.md; empty where it lists none
  std::string repository;   // default base URL of the file (tinydiarize lives elsewhere)
  std::string file = "";    // the file's name in the repository; "" = ggml-NAME.bin
  std::string mmproj = "";  // a second file fetched and cached with it (Qwen3-ASR's audio encoder); "" = none
  FileCheck check = {};     // what a pull verifies besides size and SHA-1; empty: nothing more
  std::vector<std::string> aliases = {};  // other names that find it ("parakeet-tdt-0.6b-v3": its f16 file)
};

// transcribe.cpp's Hugging Face organisation: MODEL-gguf/MODEL-TYPE.gguf (its docs/models/MODEL.md).
// Its Parakeet, Nemotron and Voxtral Realtime files are in those families' catalogues,
// its Sortformer files in the diarization stage's.
inline constexpr const char* kTranscribeCppBaseUrl = "https://huggingface.co/handy-computer";
// One of its files: "transcribe.cpp/MODEL-TYPE" in lower case, MODEL-TYPE.gguf in
// handy-computer/MODEL + repository_suffix ("-gguf"; Voxtral's repository: "-GGUF").
ModelInfo transcribe_cpp_file(const std::string& model, const std::string& type, uint64_t bytes, FileCheck check,
                              const std::string& repository_suffix = "-gguf");

// The public repository whisper.cpp's models/download-ggml-model.sh downloads from
// (the Whisper family's catalogue; `earshot pull --base-url`'s default).
inline constexpr const char* kDefaultBaseUrl = "https://huggingface.co/ggerganov/whisper.cpp/resolve/main";

// The entry of `catalogue` called `name`: its name, an alias, or its file's name
// ("ggml-tiny.en.bin", "Qwen3-ASR-0.6B-Q8_0.gguf"), in any case. Null when none is.
const ModelInfo* find_model(std::span<const ModelInfo> catalogue, std::string_view name);
// "tiny, tiny.en, ..." for error messages.
std::string model_names(std::span<const ModelInfo> catalogue);

std::string model_file_name(const ModelInfo& model);  // model.file, else ggml-NAME.bin
// --base-url, else $EARSHOT_MODEL_BASE_URL, else the model's public repository; then /model_file_name().
std::string model_url(const ModelInfo& model, const std::optional<std::string>& base_url = std::nullopt);
// The same for the model's mmproj ("" when it has none).
std::string mmproj_url(const ModelInfo& model, const std::optional<std::string>& base_url = std::nullopt);

// $EARSHOT_CACHE_DIR, else $XDG_CACHE_HOME/earshot/models, else ~/.cache/earshot/models.
std::filesystem::path default_cache_dir();
std::filesystem::path cached_model_path(const ModelInfo& model, const std::filesystem::path& cache_dir);
// Where its mmproj is cached: beside the model, under the name the engine looks for
// (mmproj-FILE); "" when it has none.
std::filesystem::path cached_mmproj_path(const ModelInfo& model, const std::filesystem::path& cache_dir);
// Every file of the model is in the cache.
bool is_cached(const ModelInfo& model, const std::filesystem::path& cache_dir);

// A model argument to a file: an existing path; else a name of `catalogue` present in
// the cache. Otherwise throws earshot::Error saying to run `earshot pull NAME`, or
// where to put the file by hand and its download URL (kIo), or that the name is
// unknown, listing the catalogue (kInvalidArgument).
std::filesystem::path resolve_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                    const std::filesystem::path& cache_dir = default_cache_dir());

// A --diarization-model argument to a file: an existing path; else the name of
// an entry of `catalogue` (the diarization stage's) present in the cache.
// Otherwise throws as resolve_model, saying "diarization model".
std::filesystem::path resolve_diarization_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                                const std::filesystem::path& cache_dir = default_cache_dir());

// Throws earshot::Error(kInvalidModel) unless `path` starts like a legacy ggml
// Whisper file: magic, plausible hyper-parameters, and a complete mel filter bank.
void check_ggml_whisper_header(const std::filesystem::path& path);
// Likewise for whisper.cpp's legacy Parakeet file: magic, 15 hyper-parameters and
// a filter bank header that repeats n_mels and n_fft/2+1.
void check_ggml_parakeet_header(const std::filesystem::path& path);
// Likewise for a published Parakeet GGUF: architecture "parakeet" in a layout this
// build reads (transcribe.cpp's stt.parakeet.* or parakeet.cpp's parakeet.* keys).
void check_published_parakeet_header(const std::filesystem::path& path);
// Likewise for a Sortformer GGUF: transcribe.cpp's stt.sortformer.* layout or earshot's.
void check_sortformer_header(const std::filesystem::path& path);

// A --translation-model argument to a file: an existing path; else the name of
// an entry of `catalogue` (the translation stage's) present in the cache.
// Otherwise throws earshot::Error saying to run `earshot pull NAME` (kIo) or
// that the name is unknown (kInvalidArgument), saying "translation model".
std::filesystem::path resolve_translation_model(const std::string& name_or_path, std::span<const ModelInfo> catalogue,
                                                const std::filesystem::path& cache_dir = default_cache_dir());

// Throws earshot::Error(kInvalidModel) unless `path` is a GGUF file (complete
// metadata and tensor table) naming a general.architecture.
void check_gguf_llm_header(const std::filesystem::path& path);

}  // namespace earshot::models

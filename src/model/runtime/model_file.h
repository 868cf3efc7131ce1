// What a model file is, from its first bytes: the one question engine::load asks
// before it picks a model family. Whisper and Silero VAD come in whisper.cpp's
// legacy ggml files (same magic, told apart by the field after it); every other
// family in GGUF, named by its general.architecture.
//
//   const runtime::ModelFileProbe probe = runtime::probe_model_file(path);
//   switch (probe.kind) {
//     case runtime::ModelFileKind::kGgmlWhisper: ... whisper::Model::load(path)
//     case runtime::ModelFileKind::kGguf: ... the family registered for probe.architecture
//     default: throw Error(kInvalidModel, "no model family reads " + path + ": it is " + probe.description);
//   }
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace earshot::runtime {

inline constexpr uint32_t kGgmlMagic = 0x67676d6c;  // "ggml" as a little-endian u32: whisper.cpp's legacy files
// How many leading bytes describe_file_start looks at.
inline constexpr size_t kProbeBytes = 512;

enum class ModelFileKind {
  kGgmlWhisper,   // legacy ggml Whisper model (magic, then n_vocab)
  kGgmlVad,       // whisper.cpp's legacy ggml VAD model (magic, then a model type string "silero-16k")
  kGgmlParakeet,  // whisper.cpp's legacy ggml Parakeet-TDT model (magic, 15 hparams, then n_mels and n_fft/2+1)
  kGguf,          // GGUF; see architecture
  kOther,         // anything else; see description
};

// Whose layout a GGUF file of architecture "parakeet" is: two projects publish
// files under that name, told apart by their keys (transcribe.cpp: stt.parakeet.*,
// its diarizer stt.sortformer.*; parakeet.cpp: parakeet.*).
enum class PublishedLayout {
  kNone,                     // not one of these
  kTranscribeCppParakeet,    // transcribe.cpp's Parakeet/Nemotron transducers (and CTC)
  kTranscribeCppSortformer,  // transcribe.cpp's Sortformer diarizer
  kParakeetCpp,              // parakeet.cpp's (mudler/parakeet.cpp) files
};
// "transcribe.cpp", "parakeet.cpp" ("" for kNone).
std::string_view project_name(PublishedLayout layout);

struct ModelFileProbe {
  ModelFileKind kind = ModelFileKind::kOther;
  // general.architecture of a GGUF file ("" when it has none, and for the other kinds).
  std::string architecture;
  PublishedLayout published = PublishedLayout::kNone;
  // For messages: "a GGUF file of architecture 'qwen3'", "a safetensors file
  // (Hugging Face weights; earshot reads GGUF: convert it)", "an HTML page (a
  // failed or redirected download?)", ...
  std::string description;
};

// Reads the first bytes of `path` (and for GGUF the metadata, through GgufFile).
// Throws earshot::Error(kIo) when the file cannot be read (or is a directory), and GgufFile's
// kInvalidModel errors for a GGUF file that cannot be read; every other content
// is an answer, not an error.
ModelFileProbe probe_model_file(const std::filesystem::path& path);

class GgufFile;
// Which published layout a GGUF file is, from its keys.
PublishedLayout published_layout(const GgufFile& file);

// The kind from the first bytes alone (kProbeBytes of them suffice): a GGUF file
// is kGguf here without its metadata being read.
ModelFileKind classify_file_start(std::span<const uint8_t> head);

// What bytes starting a file look like, as a phrase for error messages ("an
// empty file", "a legacy ggml model (magic 0x67676d6c)", "a .nemo/tar archive",
// "a text file starting with 'Not Found'", "unrecognised binary data starting
// 12 34 56 78 ..."). file_size is the whole file's (the head may be shorter).
std::string describe_file_start(std::span<const uint8_t> head, uint64_t file_size);

}  // namespace earshot::runtime

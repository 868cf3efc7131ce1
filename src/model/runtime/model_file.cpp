#include "model/runtime/model_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "model/runtime/gguf_file.h"

namespace earshot::runtime {
namespace {

uint32_t u32_at(std::span<const uint8_t> b, size_t at) {
  uint32_t v = 0;
  if (b.size() >= at + 4) std::memcpy(&v, b.data() + at, 4);
  return v;
}

bool starts_with(std::span<const uint8_t> b, std::string_view prefix, size_t at = 0) {
  return b.size() >= at + prefix.size() && std::memcmp(b.data() + at, prefix.data(), prefix.size()) == 0;
}

// The head as lower-case text without leading whitespace or a UTF-8 byte order mark.
std::string lowered_text(std::span<const uint8_t> b) {
  size_t i = starts_with(b, "\xEF\xBB\xBF") ? 3 : 0;
  while (i < b.size() && std::isspace(b[i])) ++i;
  std::string s;
  for (; i < b.size() && s.size() < 64; ++i) s += static_cast<char>(std::tolower(b[i]));
  return s;
}

bool is_text(std::span<const uint8_t> b) {
  return !b.empty() && std::all_of(b.begin(), b.end(), [](uint8_t c) {
    return c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c != 0x7f);  // UTF-8 continuation bytes pass
  });
}

// whisper.cpp's VAD file follows the magic with the length of a short model type string.
bool looks_like_vad(std::span<const uint8_t> b) {
  const uint32_t length = u32_at(b, 4);
  if (length < 1 || length > 64 || b.size() < 8 + length) return false;
  return std::all_of(b.begin() + 8, b.begin() + 8 + length, [](uint8_t c) { return c > 0x20 && c < 0x7f; });
}

// whisper.cpp's Parakeet file: 15 i32 hyper-parameters (n_mels the 6th, n_fft the
// 8th), then the filter bank's n_mel and bin count, which must repeat them.
bool looks_like_parakeet(std::span<const uint8_t> b) {
  if (b.size() < 4 + 17 * 4) return false;
  const uint32_t n_mels = u32_at(b, 4 + 5 * 4), n_fft = u32_at(b, 4 + 7 * 4);
  return n_mels > 0 && n_fft > 1 && u32_at(b, 4 + 15 * 4) == n_mels && u32_at(b, 4 + 16 * 4) == n_fft / 2 + 1;
}

}  // namespace

std::string describe_file_start(std::span<const uint8_t> head, uint64_t file_size) {
  if (file_size == 0) return "an empty file";
  if (starts_with(head, "GGUF")) return "a GGUF file";
  const uint32_t magic = u32_at(head, 0);
  if (head.size() >= 4) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    if (magic == kGgmlMagic) {
      if (looks_like_vad(head)) return "a legacy ggml VAD model (whisper.cpp's Silero format)";
      if (looks_like_parakeet(head)) return "a legacy ggml Parakeet model (whisper.cpp's parakeet .bin format)";
      const uint32_t n_vocab = u32_at(head, 4);
      return n_vocab >= 51864 && n_vocab <= 51866 ? "a legacy ggml Whisper model (whisper.cpp's .bin format)"
                                                  : std::string("a legacy ggml model (magic ") + hex + ")";
    }
    if (magic == 0x67676a74 || magic == 0x67676d66 || magic == 0x67676c61) {
      return std::string("a legacy llama.cpp ggml file (magic ") + hex + "), older than GGUF: re-convert the model";
    }
  }
  // safetensors: a little-endian u64 header length, then the JSON header.
  if (head.size() >= 9 && head[8] == '{' && u32_at(head, 4) == 0 && u32_at(head, 0) + 8 <= file_size) {
    return "a safetensors file (Hugging Face weights): convert it to GGUF";
  }
  if (head.size() >= 262 && starts_with(head, "ustar", 257)) {
    return "a tar archive (a NeMo .nemo checkpoint is one): convert the model to GGUF";
  }
  if (starts_with(head, "\x1f\x8b")) return "a gzip-compressed file: unpack it first";
  if (starts_with(head, "PK\x03\x04")) return "a zip archive (a PyTorch .pt checkpoint is one): convert it";
  if (head.size() >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) {
    return "a Python pickle (an old PyTorch checkpoint): convert it";
  }
  const std::string text = lowered_text(head);
  if (text.starts_with("<!doctype html") || text.starts_with("<html") || text.starts_with("<?xml") ||
      text.starts_with("<head")) {
    return "an HTML page, not a model (a failed or redirected download?)";
  }
  if (text.starts_with("version https://git-lfs")) {
    return "a Git LFS pointer, not the model itself (fetch it with git lfs pull)";
  }
  if (is_text(head.subspan(0, std::min<size_t>(head.size(), 64)))) {
    std::string start;
    for (size_t i = 0; i < head.size() && start.size() < 40; ++i) {
      start += head[i] == '\n' || head[i] == '\r' || head[i] == '\t' ? ' ' : static_cast<char>(head[i]);
    }
    return (text.starts_with("{") || text.starts_with("[") ? "a JSON/text file" : "a text file") +
           std::string(" starting with '") + start + "'";
  }
  std::string bytes;
  for (size_t i = 0; i < std::min<size_t>(head.size(), 8); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02x", head[i]);
    bytes += (i ? " " : "") + std::string(hex);
  }
  return "unrecognised binary data starting " + bytes;
}

ModelFileKind classify_file_start(std::span<const uint8_t> head) {
  if (starts_with(head, "GGUF")) return ModelFileKind::kGguf;
  if (u32_at(head, 0) != kGgmlMagic || head.size() < 8) return ModelFileKind::kOther;
  if (looks_like_vad(head)) return ModelFileKind::kGgmlVad;
  return looks_like_parakeet(head) ? ModelFileKind::kGgmlParakeet : ModelFileKind::kGgmlWhisper;
}

std::string_view project_name(PublishedLayout layout) {
  switch (layout) {
    case PublishedLayout::kTranscribeCppParakeet:
    case PublishedLayout::kTranscribeCppSortformer: return "transcribe.cpp";
    case PublishedLayout::kParakeetCpp: return "parakeet.cpp";
    case PublishedLayout::kNone: break;
  }
  return "";
}

PublishedLayout published_layout(const GgufFile& file) {
  const std::vector<std::string> keys = file.keys();
  auto any = [&](std::string_view prefix) {
    return std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k.starts_with(prefix); });
  };
  if (any("stt.parakeet.")) return PublishedLayout::kTranscribeCppParakeet;
  if (any("stt.sortformer.")) return PublishedLayout::kTranscribeCppSortformer;
  if (file.architecture() == "parakeet" && any("parakeet.")) return PublishedLayout::kParakeetCpp;
  return PublishedLayout::kNone;
}

namespace {

// How probe_model_file describes a published layout.
std::string describe_published(const GgufFile& file, PublishedLayout layout) {
  switch (layout) {
    case PublishedLayout::kTranscribeCppParakeet: {
      const auto head = file.find_string("stt.parakeet.head_kind");
      return "a transcribe.cpp Parakeet GGUF (stt.parakeet.* keys" + (head ? ", head '" + *head + "'" : "") + ")";
    }
    case PublishedLayout::kTranscribeCppSortformer:
      return "a transcribe.cpp Sortformer diarization GGUF (stt.sortformer.* keys)";
    case PublishedLayout::kParakeetCpp: {
      const auto arch = file.find_string("parakeet.arch");
      return "a parakeet.cpp GGUF (parakeet.* keys" + (arch ? ", parakeet.arch '" + *arch + "'" : "") + ")";
    }
    case PublishedLayout::kNone: break;
  }
  return "";
}

}  // namespace

ModelFileProbe probe_model_file(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw Error(ErrorCode::kIo, "model " + path.string() + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open model file " + path.string() + ": " + std::strerror(errno));
  std::vector<uint8_t> head(kProbeBytes);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (in.bad()) throw Error(ErrorCode::kIo, "cannot read model file " + path.string());
  head.resize(static_cast<size_t>(in.gcount()));
  uint64_t size = std::filesystem::file_size(path, error);
  if (error) size = head.size();

  ModelFileProbe probe;
  if (starts_with(head, "GGUF")) {
    const GgufFile file = GgufFile::open(path);
    probe.kind = ModelFileKind::kGguf;
    probe.architecture = file.architecture();
    probe.description = file.architecture().empty() ? "a GGUF file without " + std::string(kArchitectureKey)
                                                    : "a GGUF file of architecture '" + file.architecture() + "'";
    probe.published = published_layout(file);
    if (probe.published != PublishedLayout::kNone) probe.description = describe_published(file, probe.published);
    return probe;
  }
  probe.kind = classify_file_start(head);
  probe.description = describe_file_start(head, size);
  return probe;
}

}  // namespace earshot::runtime

// What the fuzz targets share: the input split into a text head and a body, the
// body cut into pieces whose sizes the input itself chooses, and a per-process
// temporary file for the loaders that read paths.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace earshot::fuzz {

// The bytes before the first '\n' (a request target, a Content-Type) and the rest.
struct HeadAndBody {
  std::string_view head;
  std::string_view body;
};
inline HeadAndBody split_head(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t newline = all.find('\n');
  if (newline == std::string_view::npos) return {all, {}};
  return {all.substr(0, newline), all.substr(newline + 1)};
}

// The first byte says how many of the next bytes (1-8) are piece sizes; piece i
// of the rest has size 1 + sizes[i % n] * scale bytes. So the fuzzer explores
// where a stream is cut (inside a header, a sample, a packet) as well as its bytes.
inline std::vector<std::span<const uint8_t>> pieces(const uint8_t* data, size_t size, size_t scale) {
  std::vector<std::span<const uint8_t>> out;
  if (size == 0) return out;
  const size_t n_sizes = std::min<size_t>(1 + data[0] % 8, size - 1);
  const uint8_t* sizes = data + 1;
  size_t at = 1 + n_sizes;
  for (size_t i = 0; at < size; ++i) {
    const size_t piece = n_sizes == 0 ? size - at : std::min(size - at, 1 + sizes[i % n_sizes] * scale);
    out.emplace_back(data + at, piece);
    at += piece;
  }
  return out;
}

// A file in the temporary folder, one per fuzzing process (libFuzzer's -jobs run
// several), removed when the process exits normally (a crash leaves it for study).
inline const std::filesystem::path& temp_file(const char* suffix) {
  struct Owned {
    std::filesystem::path path;
    ~Owned() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  };
  static const Owned file{std::filesystem::temp_directory_path() /
                          ("earshot-fuzz-" + std::to_string(::getpid()) + suffix)};
  return file.path;
}
inline bool write_temp_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool ok = std::fwrite(data, 1, size, file) == size;
  return std::fclose(file) == 0 && ok;
}

// A broken invariant: abort, so libFuzzer records the input as a crash.
inline void check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

// An error message that quotes what a client sent: short, with no control
// character (a quoted NUL cut the text read through what(), a newline or an
// escape reached logs raw) and no byte that is not printable ASCII or UTF-8's
// (quote_client_text writes bad bytes out as \xNN).
inline void check_client_message(std::string_view text) {
  check(text.size() < 1024, "an error message quoting a client is short");
  for (unsigned char c : text) check(c >= 0x20 && c != 0x7F, "an error message holds no control character");
}

}  // namespace earshot::fuzz

// Resumable, verified HTTP(S) downloads of model files, and `earshot pull`'s core.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "model/registry.h"

namespace earshot::models {

// done = bytes of the file on disk so far (including a resumed part); total when known.
using ProgressFn = std::function<void(uint64_t done, std::optional<uint64_t> total)>;

struct DownloadOptions {
  std::string url;                    // http:// or https://
  std::filesystem::path destination;  // written as destination + ".part", renamed when verified
  std::string expected_sha1;          // hex; empty: not checked
  // Called on the finished .part before the rename; throw to reject it (the part is then deleted).
  std::function<void(const std::filesystem::path& part)> verify;
  ProgressFn progress;
  int max_attempts = 4;  // a dropped connection is retried, resuming with an HTTP Range request
  int max_redirects = 10;
  int timeout_seconds = 60;  // per network operation
};

struct DownloadResult {
  uint64_t bytes = 0;         // size of the finished file
  uint64_t resumed_from = 0;  // bytes already on disk when the first request was made
  int requests = 0;           // HTTP requests made, redirects included
};

// Downloads `url` to `destination`: resumes an existing .part with a Range request,
// follows redirects, checks the size against Content-Length / Content-Range, then the
// SHA-1 and `verify`, and renames atomically. A failed verification deletes the .part
// (its bytes are wrong, resuming it would keep them). Throws earshot::Error(kIo) with
// the URL and the reason (kInvalidModel from a failed verification).
DownloadResult download_file(const DownloadOptions& options);

// SHA-1 of a file as lowercase hex.
std::string sha1_of_file(const std::filesystem::path& path);

struct PullOptions {
  std::optional<std::string> base_url;  // see model_url()
  std::filesystem::path cache_dir;      // empty: default_cache_dir()
  ProgressFn progress;
  int max_attempts = 4;
};

// Downloads a catalogue entry into the cache (under model_file_name(); its mmproj
// beside it), verifying size, SHA-1 when known, and the entry's check (an mmproj:
// a GGUF). Returns the cached path.
std::filesystem::path pull_model(const ModelInfo& model, const PullOptions& options);

}  // namespace earshot::models

// libFuzzer entry point for the GGUF reader and the weight placement (built only
// with clang: -DEARSHOT_LIBFUZZER=ON). Run: earshot_gguf_fuzzer corpus/ with a
// GGUF file in corpus/. Any exception other than earshot::Error, any sanitizer
// report or crash is a finding.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("earshot-gguf-fuzz-" + std::to_string(::getpid()) + ".gguf");
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    const auto gguf = earshot::runtime::GgufFile::open(path);
    // Every tensor of whatever table the file has, as if a model expected exactly those.
    std::vector<earshot::runtime::ExpectedTensor> expected;
    for (const auto& t : gguf.tensors()) expected.push_back({t.name, t.type, std::max(t.n_dims, 1), t.ne});
    const auto placements = earshot::runtime::place_gguf_tensors(gguf, expected);
    earshot::runtime::ModelWeights::load(earshot::runtime::ByteSource::file(path), placements, nullptr, gguf.label());
  } catch (const earshot::Error&) {
  }
  return 0;
}

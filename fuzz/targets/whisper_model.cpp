// libFuzzer entry point for the model loader (built only with clang:
// -DEARSHOT_LIBFUZZER=ON). Run: earshot_model_loader_fuzzer corpus/ with a
// generated model in corpus/. Any exception other than earshot::Error, any
// sanitizer report or crash is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "model/whisper/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("earshot-loader-fuzz-" + std::to_string(::getpid()) + ".bin");
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    earshot::whisper::Model::load(path);
  } catch (const earshot::Error&) {
  }
  return 0;
}

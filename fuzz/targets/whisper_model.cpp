// The legacy ggml Whisper loader (whisper.cpp's .bin, what users download):
// header, mel filters, vocabulary, tensor records, weights placed on the CPU,
// then the tokenizer built from the file's vocabulary as the engine does.
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>

#include "common/error.h"
#include "fuzz_input.h"
#include "model/whisper/asr_text.h"
#include "model/whisper/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& path = earshot::fuzz::temp_file(".bin");
  if (!earshot::fuzz::write_temp_file(path, data, size)) return 0;
  try {
    const auto model = earshot::whisper::Model::load(path);
    earshot::whisper::WhisperText::for_model(*model);
  } catch (const earshot::Error&) {
  }
  return 0;
}

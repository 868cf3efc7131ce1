// The Silero VAD loader (whisper.cpp's ggml VAD .bin): header, hyperparameters,
// tensor records and weights, from memory. Any exception other than
// earshot::Error, any sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "vad/vad.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    earshot::vad::VadModel::load_from_memory(std::span<const uint8_t>(data, size), "fuzz input");
  } catch (const earshot::Error&) {
  }
  return 0;
}

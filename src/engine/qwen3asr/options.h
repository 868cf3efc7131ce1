// The Qwen3-ASR family's own settings (ModelSpec::options<Qwen3AsrOptions>()):
// a text GGUF (--model) and its audio encoder (--mmproj).
#pragma once

#include <filesystem>

#include "model/qwen3asr/model.h"

namespace earshot::engine {

struct Qwen3AsrOptions {
  static constexpr const char* kFamily = "qwen3asr";
  std::filesystem::path mmproj;           // "" = found next to the model (PREFIX-mmproj.gguf, mmproj-NAME.gguf)
  std::filesystem::path alignment_heads;  // a file with alignment_heads_compact; "" = the last quarter of layers
  int n_ctx = 1024;                       // decoder context per stream (prompt, 15 s of audio, context, output)
  bool hf_mel_frames = false;             // --qwen3-mel-frames hf: n/160 mel frames (HF) instead of mtmd's n/160 + 1
  // --qwen3-reuse: a stream keeps its unchanged encoder windows and prompt KV rows
  // across passes (on), or encodes and prefills everything each pass (off, as WhisperLiveKit's qwen3_simul).
  bool reuse = true;
  // --qwen3-quantized-products: where a quantised pair's products of many rows run
  // (qwen3asr::ModelOptions::QuantizedProducts: auto, int8, openblas, ggml).
  qwen3asr::ModelOptions::QuantizedProducts quantized_products = qwen3asr::ModelOptions::QuantizedProducts::kAuto;
};

}  // namespace earshot::engine

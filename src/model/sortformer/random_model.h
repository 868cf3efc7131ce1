// Random-weight Sortformer GGUFs for the tests and the benchmark, at small
// dimensions or at diar_streaming_sortformer_4spk-v2's (17 x 512 FastConformer,
// 18 x 192 Transformer). Linears ~ N(0, 1/fan_in), LayerNorm gains near 1,
// BatchNorm statistics near (0, 1), Slaney filters and NeMo's Hann window.
// (tests/model/reference/sortformer_nemo.py writes the same layout as a .nemo.)
#pragma once

#include <ggml.h>

#include <filesystem>
#include <string>

namespace earshot::sortformer {

struct RandomModelOptions {
  bool real = false;  // false: n_mels 32, d 64 (2 layers), Transformer 32 (2 layers)
  unsigned seed = 1;
  int speakers = 4;  // the speakers the model tells apart (1..4)
  ggml_type matrix_type = GGML_TYPE_F32;
};

// Throws Error(kIo) when the file cannot be written.
void write_random_model(const std::filesystem::path& path, const RandomModelOptions& options);

}  // namespace earshot::sortformer

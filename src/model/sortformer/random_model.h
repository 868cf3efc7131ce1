// Random-weight Sortformer GGUFs for the tests and the benchmark, at small
// dimensions or at diar_streaming_sortformer_4spk-v2's (17 x 512 FastConformer,
// 18 x 192 Transformer). Linears ~ N(0, 1/fan_in), LayerNorm gains near 1,
// BatchNorm statistics near (0, 1), Slaney filters and NeMo's Hann window.
// Each residual branch's output projection (the Conformer's feed-forward,
// attention and conv outputs, the Transformer's attention and feed-forward
// outputs) is scaled down, as a trained deep model's are: at full scale every
// layer adds a part common to all frames (attention averages them) as large as
// the frame's own, and through 17 + 18 layers the frames become one (at the real
// dimensions the Transformer's output varied by 7e-5 of its size from frame to
// frame; scaled by kRealResidualScale, by 0.20, like the small model's).
// (tests/model/reference/sortformer_nemo.py writes the same layout as a .nemo.)
#pragma once

#include <ggml.h>

#include <cmath>
#include <filesystem>
#include <string>

namespace earshot::sortformer {

inline constexpr float kRealResidualScale = 0.2f;

struct RandomModelOptions {
  bool real = false;  // false: n_mels 32, d 64 (2 layers), Transformer 32 (2 layers)
  unsigned seed = 1;
  int speakers = 4;  // the speakers the model tells apart (1..4)
  // The residual branches' output projections (weights and biases) times this;
  // NAN: the dimensions' (real: kRealResidualScale; small: 1, two layers keep
  // their frames apart unscaled).
  float residual_scale = NAN;
  ggml_type matrix_type = GGML_TYPE_F32;
};

// Throws Error(kIo) when the file cannot be written.
void write_random_model(const std::filesystem::path& path, const RandomModelOptions& options);

}  // namespace earshot::sortformer

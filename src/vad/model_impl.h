// Internal: the tensors of a loaded Silero VAD model (shared, read-only).
#pragma once

#include <array>
#include <string>

#include "ggml-backend.h"
#include "ggml.h"
#include "model/runtime/weights.h"
#include "vad/vad.h"

namespace earshot::vad {

// The architecture this implementation supports (Silero 16 kHz, v5/v6 layout).
inline constexpr int kEncoderLayers = 4;
inline constexpr std::array<int, kEncoderLayers> kEncoderIn = {129, 128, 64, 64};
inline constexpr std::array<int, kEncoderLayers> kEncoderOut = {128, 64, 64, 128};
inline constexpr std::array<int, kEncoderLayers> kEncoderStride = {1, 2, 2, 1};
inline constexpr int kEncoderKernel = 3;
inline constexpr int kLstmSize = 128;      // input and hidden size
inline constexpr int kStftFilter = 256;    // STFT window length
inline constexpr int kStftHop = 128;       // STFT hop
inline constexpr int kStftChannels = 258;  // 129 real + 129 imaginary basis rows

struct VadModel::Impl {
  std::string model_type;
  std::string version;

  ggml_tensor* stft_basis = nullptr;                          // [256, 1, 258] f16
  std::array<ggml_tensor*, kEncoderLayers> encoder_weight{};  // [3, in, out] f16
  std::array<ggml_tensor*, kEncoderLayers> encoder_bias{};    // [out] f32
  ggml_tensor* lstm_ih_weight = nullptr;                      // [128, 512] f32, gate order i, f, g, o
  ggml_tensor* lstm_ih_bias = nullptr;                        // [512] f32
  ggml_tensor* lstm_hh_weight = nullptr;                      // [128, 512] f32
  ggml_tensor* lstm_hh_bias = nullptr;                        // [512] f32
  ggml_tensor* final_weight = nullptr;                        // [128, 1] f16 (1x1 conv over 128 channels)
  ggml_tensor* final_bias = nullptr;                          // [1] f32

  runtime::ModelWeights weights;  // the tensors above, in one CPU buffer

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();
};

}  // namespace earshot::vad

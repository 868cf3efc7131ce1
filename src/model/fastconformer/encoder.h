// The FastConformer encoder on ggml: dw-striding subsampling (8x), then per
// layer a half-step FFN, relative-position multi-head self-attention (pos_bias_u
// and pos_bias_v, Transformer-XL relative shift), the convolution module (GLU,
// depthwise conv, BatchNorm, SiLU), a second half-step FFN and a LayerNorm.
// One Encoder per stream (it owns its graph allocator); the model is shared.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <memory>
#include <span>
#include <vector>

#include "model/fastconformer/model.h"

namespace earshot::fastconformer {

struct EncoderOptions {
  // NeMo's BatchNorm divides by sqrt(running_var + eps) with eps 1e-5;
  // whisper.cpp's libparakeet by sqrt(running_var). NeMo's is the model as
  // trained and the default; 0 reproduces libparakeet (the parity tool).
  float batch_norm_eps = 1e-5f;
};

struct EncoderOutput {
  int n_frames = 0;
  int n_state = 0;
  std::vector<float> data;  // [n_frames][n_state]
};

class Encoder {
 public:
  // The backend is borrowed and must be on the model's device (null model device: the CPU).
  Encoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options = {});
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // mel: [n_frames][n_mels] frame-major. Throws Error(kInvalidArgument) for an
  // empty or mis-sized mel, kInternal when ggml cannot compute the graph.
  EncoderOutput encode(std::span<const float> mel, int n_mel_frames);

 private:
  std::shared_ptr<const Model> model_;
  ggml_backend_t backend_;
  EncoderOptions options_;
  ggml_gallocr_t alloc_ = nullptr;
  std::vector<uint8_t> meta_;
};

// Sinusoidal relative positions T-1 ... -(T-1) as NeMo's RelPositionalEncoding
// lays them out: [2T-1][d], pe[j][2k] = sin(p_j w_k), pe[j][2k+1] = cos(p_j w_k).
std::vector<float> relative_positions(int n_frames, int d_model);

}  // namespace earshot::fastconformer

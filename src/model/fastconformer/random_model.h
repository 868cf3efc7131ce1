// Random-weight FastConformer-TDT models for the tests, the parity tool and the
// benchmarks, at small dimensions or at parakeet-tdt-0.6b's (tools/make_parakeet
// writes them). Scaled initialisation (std 1/sqrt(fan_in)), zero-sum weight rows
// and small biases keep the encoder output moving over time; a bias on the
// joint's blank logit sets the share of steps that emit a piece.
#pragma once

#include <ggml.h>

#include <cmath>
#include <string>

#include "model/fastconformer/model_writer.h"

namespace earshot::fastconformer {

struct RandomModelOptions {
  // small: d_model 64, 4 heads, 2 layers, 64 pieces; real: parakeet-tdt-0.6b;
  // tiny: d_model 8, 1 layer, 8 pieces, 8 mels (the fuzz seeds).
  std::string dims = "small";
  unsigned seed = 1;
  float blank_bias = NAN;          // NAN: the default of the dimensions (an emitting share of 20-40%)
  int n_layer = -1, n_state = -1;  // > 0: override
  bool rnnt = false;               // no durations (RNN-T)
  ggml_type matrix_type = GGML_TYPE_F32;
  // +1 / -1: a probe model, the same encoder with a joint that copies +-relu of
  // each encoder value into the first logits and emits a piece with duration 1 on
  // every frame (n_pred_dim = n_state), so that the encoder output of a library
  // that only reports logits can be read back.
  int probe = 0;
  // A cache-aware streaming model shaped like NVIDIA's Nemotron streaming ASR:
  // causal subsampling and depthwise conv, LayerNorm in the conv module,
  // chunked_limited attention [att_left, att_right] with right contexts
  // {0, 1, 6, 13} (80 to 1120 ms chunks), xscaling, no feature normalisation, RNN-T.
  bool streaming = false;
  int att_left = -1;   // streaming: -1 = the dimensions' (small 12, real 70)
  int att_right = 13;  // streaming: the default right context
  // Nemotron 3.5's language prompt kernel (GGUF only): a one-hot of 8 (tiny), 16
  // (small) or 128 (real) slots, hidden 4, 32 or 2048; languages en-US, en-GB,
  // de-DE, fr-FR, es-ES in slots 0-4 and auto in the last; the last five pieces
  // are their tags ("<en-US>"...), which the model emits like any piece.
  bool prompt = false;
};

ModelData random_model(const RandomModelOptions& options);

}  // namespace earshot::fastconformer

// The Whisper encoder's and decoder's work in machine terms: the FLOP of an encoder
// pass and the bytes of weights one decoder step reads, and the machine's limits
// for them measured in the same run (OpenBLAS's sgemm at the encoder's own product
// shapes, a streaming read's bandwidth), so every timing has a ratio beside it.
#pragma once

#include <string>
#include <vector>

#include "model/whisper/model.h"
#include "tools/common/machine_limits.h"

namespace earshot::tools {

// One kind of product in an encoder pass: its shape and how often a pass runs it.
struct EncoderProduct {
  std::string name;
  GemmShape shape;
  int count = 1;
  bool weight = true;  // a weight matrix (false: attention's activation products)
  // The convolutions' weights stay F16 in every Whisper file, quantised ones included
  // (whisper.cpp's quantiser leaves 3-D tensors alone; 3 x 80 columns are no whole
  // number of Q8_0 blocks either).
  bool kept_f16 = false;
};

// Every matrix product of one encoder pass over n_ctx encoder frames (30 s = 1500):
// the two convolutions as im2col products, the projections, the MLP, and attention's
// two products per head (explicit softmax; flash attention does the same FLOP).
std::vector<EncoderProduct> encoder_products(const whisper::Hparams& hp, int n_ctx);
double encoder_flop(const std::vector<EncoderProduct>& products);

// Bytes of weights a single-token decoder step reads: every decoder layer's
// matrices except the cross-attention keys and values (computed once per encoder
// pass), and the vocabulary matrix of the logits.
double decoder_step_weight_bytes(const whisper::Model& model);

struct MachineRates {
  double sgemm_gflops = 0;  // FLOP-weighted over the products: total FLOP / time at sgemm's rates
  double ggml_gflops = 0;   // the same for ggml's product alone, at the model's weight type
  double op_gflops = 0;     // and for earshot's OpenBLAS op (runtime::blas_mul_mat)
  double bandwidth_gbs = 0;
};

// Times OpenBLAS's sgemm and ggml's mul_mat at every product shape of an encoder pass
// over n_ctx frames with `threads` threads, prints a row per shape (GFLOP/s of both,
// ratio) and (with `bandwidth`) the streaming-read bandwidth, and returns the
// pass-weighted rates.
MachineRates measure_machine(const whisper::Model& model, int n_ctx, int threads, int reps, bool bandwidth = true);

}  // namespace earshot::tools

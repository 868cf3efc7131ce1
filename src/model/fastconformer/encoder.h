// The FastConformer encoder on ggml: dw-striding subsampling (8x), then per
// layer a half-step FFN, relative-position multi-head self-attention (pos_bias_u
// and pos_bias_v, Transformer-XL relative shift), the convolution module (GLU,
// depthwise conv, BatchNorm or LayerNorm, SiLU), a second half-step FFN and a
// LayerNorm. Every flag comes from the file: causal subsampling convs and
// depthwise conv (cache-aware streaming models), the attention context and its
// style (NeMo's regular band or chunked_limited mask), xscaling.
// One Encoder per stream (it owns its graph allocator); the model is shared.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/fastconformer/model.h"
#include "model/runtime/graph_runner.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::fastconformer {

struct EncoderOptions {
  // NeMo's BatchNorm divides by sqrt(running_var + eps) with eps 1e-5;
  // whisper.cpp's libparakeet by sqrt(running_var). NeMo's is the model as
  // trained and the default; 0 reproduces libparakeet (the parity tool).
  float batch_norm_eps = 1e-5f;
  // ggml_conv_2d (and so libparakeet) lays the subsampling convs' input out in
  // f16 (im2col), ~3e-4 relative error; NeMo computes them in f32, the default
  // here. true reproduces libparakeet (the parity tool).
  bool f16_subsampling = false;
  // The right attention context in frames (a multi-lookahead model's choice,
  // validated against the file: kInvalidArgument otherwise); unset: the file's.
  std::optional<int> right_context;
  // The offline encoder's products (projections, feed-forward, pointwise convs):
  // ggml's kernels, OpenBLAS's sgemm (runtime/openblas_ops.h), or kAuto: OpenBLAS on
  // the CPU where it loads. The streaming step's (a few frames a chunk, bound by
  // reading the weights): runtime::step_products (kAuto: the few-row op).
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kGgml;
};

struct EncoderOutput {
  int first_frame = 0;  // the stream's encoder frame the first row is (streaming; offline 0)
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
  int right_context() const { return right_; }
  // Whether the products run on OpenBLAS (options.cpu_kernels resolved).
  bool openblas() const { return products_.openblas; }

 private:
  std::shared_ptr<const Model> model_;
  ggml_backend_t backend_;
  EncoderOptions options_;
  int right_ = -1;
  runtime::MatMul products_;  // options_.cpu_kernels resolved for the encoder's graph
  std::unique_ptr<runtime::GraphRunner> runner_;
};

// Sinusoidal relative positions T-1 ... -(T-1) as NeMo's RelPositionalEncoding
// lays them out: [2T-1][d], pe[j][2k] = sin(p_j w_k), pe[j][2k+1] = cos(p_j w_k).
std::vector<float> relative_positions(int n_frames, int d_model);
// count positions top, top - 1, ... in the same layout.
std::vector<float> relative_positions(int top, int count, int d_model);

// The right context an encoder computes with: the file's, or `right` when the
// file supports it (Error kInvalidArgument listing those it does otherwise).
int resolve_right_context(const Hparams& hp, std::optional<int> right);
// The attention mask of T frames, [query][key], 0 or -inf, as NeMo builds it for
// the file's style and left context and this right context.
std::vector<float> attention_mask(const Hparams& hp, int right, int T);

}  // namespace earshot::fastconformer

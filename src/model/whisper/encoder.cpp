// Whisper encoder graph: two 1-D convolutions (as im2col + matrix product, as
// whisper.cpp's), the positional embedding, pre-LN
// transformer blocks, ln_post, then every decoder layer's cross-attention K/V.
#include <cmath>
#include <string>

#include "common/error.h"
#include "model/runtime/graph_ops.h"
#include "model/runtime/openblas_ops.h"
#include "model/whisper/graph.h"
#include "model/whisper/graph_ops.h"

namespace earshot::whisper::detail {
namespace {

// 1-D convolution, kernel size 3, padding 1, as whisper.cpp's conv_1d_ph (ggml_conv_1d):
// the im2col buffer is f16 whatever the kernel's type, so an f32 kernel meets its input
// rounded to f16 (and is itself rounded to f16 by the f16 x f32 product), as in libwhisper.
ggml_tensor* conv1d_k3(ggml_context* ctx, ggml_tensor* kernel, ggml_tensor* input, int stride, bool openblas) {
  if (kernel->type != GGML_TYPE_F16 && kernel->type != GGML_TYPE_F32) {
    throw Error(ErrorCode::kUnsupported, std::string("convolution kernel ") + ggml_get_name(kernel) + " has type " +
                                             ggml_type_name(kernel->type) +
                                             "; only f16 and f32 convolution kernels are supported");
  }
  // im2col: [in_channels * 3, out_len]; f32 for OpenBLAS (no rounding of the input).
  ggml_tensor* cols =
      ggml_im2col(ctx, kernel, input, stride, 0, 1, 0, 1, 0, false, openblas ? GGML_TYPE_F32 : GGML_TYPE_F16);
  cols = ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2]);
  ggml_tensor* flat = ggml_reshape_2d(ctx, kernel, kernel->ne[0] * kernel->ne[1], kernel->ne[2]);
  return openblas ? runtime::blas_mul_mat(ctx, cols, flat) : ggml_mul_mat(ctx, cols, flat);  // [out_len, out_channels]
}

}  // namespace

EncoderGraph build_encoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model, const StateTensors& state,
                           int n_audio_ctx, EncoderKernels kernels, bool int8) {
  const bool openblas = kernels == EncoderKernels::kOpenBlas;
  const bool flash_attention = kernels == EncoderKernels::kGgmlFlash;
  MatMul mul_mat{openblas};
  mul_mat.int8 = int8;
  const Hparams& hp = model.hparams();
  const Weights& w = model.weights();
  const int n_state = hp.n_audio_state;
  const int n_head = hp.n_audio_head;
  const int head_dim = n_state / n_head;
  const int n_ctx = n_audio_ctx;

  EncoderGraph result;
  result.mel = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2 * n_ctx, hp.n_mels);
  ggml_set_name(result.mel, "mel");
  ggml_set_input(result.mel);

  ggml_tensor* cur = conv1d_k3(ctx, w.conv1_w, result.mel, 1, openblas);
  cur = ggml_add(ctx, cur, w.conv1_b);
  cur = ggml_gelu(ctx, cur);
  cur = conv1d_k3(ctx, w.conv2_w, cur, 2, openblas);
  cur = ggml_add(ctx, cur, w.conv2_b);
  cur = ggml_gelu(ctx, cur);

  // [n_ctx, n_state] -> [n_state, n_ctx] plus the first n_ctx positional embeddings
  // (all 1500 for the 30 s window, a prefix for audio-only input).
  ggml_tensor* pos = ggml_view_2d(ctx, w.enc_pos, w.enc_pos->ne[0], n_ctx, w.enc_pos->nb[1], 0);
  cur = ggml_add(ctx, pos, ggml_cont(ctx, ggml_transpose(ctx, cur)));

  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  ggml_tensor* inp = cur;
  for (const EncoderLayer& layer : w.encoder) {
    cur = layer_norm(ctx, inp, layer.attn_ln_w, layer.attn_ln_b);

    ggml_tensor* q = mul_mat.affine(ctx, layer.attn_q_w, cur, layer.attn_q_b);
    ggml_tensor* k = mul_mat(ctx, layer.attn_k_w, cur);
    ggml_tensor* v = mul_mat.affine(ctx, layer.attn_v_w, cur, layer.attn_v_b);

    // f16 keys and values where ggml computes the attention (whisper.cpp's types).
    cur = runtime::full_attention(ctx, q, k, v, n_head, kq_scale, {openblas, flash_attention, GGML_TYPE_F16});

    cur = mul_mat.affine(ctx, layer.attn_out_w, cur, layer.attn_out_b);
    ggml_tensor* inp_ff = ggml_add(ctx, cur, inp);

    inp = residual_mlp(ctx, layer, inp_ff, mul_mat);
  }
  ggml_tensor* encoded = layer_norm(ctx, inp, w.enc_ln_w, w.enc_ln_b);

  // Cross-attention K/V of every decoder layer, stored once for all decode steps.
  const int n_text_state = hp.n_text_state;
  const int text_head_dim = n_text_state / hp.n_text_head;
  const float k_scale = std::pow(static_cast<float>(text_head_dim), -0.25f);
  const size_t es = ggml_element_size(state.cross_k);
  for (size_t il = 0; il < w.decoder.size(); ++il) {
    const DecoderLayer& layer = w.decoder[il];
    const size_t layer_offset = il * static_cast<size_t>(n_ctx) * n_text_state * es;
    ggml_tensor* kc = ggml_scale(ctx, mul_mat(ctx, layer.cross_k_w, encoded), k_scale);
    ggml_tensor* vc = mul_mat.affine(ctx, layer.cross_v_w, encoded, layer.cross_v_b);
    vc = ggml_transpose(ctx, ggml_reshape_2d(ctx, vc, n_text_state, n_ctx));
    ggml_tensor* k_dst = ggml_view_1d(ctx, state.cross_k, static_cast<int64_t>(n_text_state) * n_ctx, layer_offset);
    ggml_tensor* v_dst = ggml_view_2d(ctx, state.cross_v, n_ctx, n_text_state, n_ctx * es, layer_offset);
    ggml_build_forward_expand(graph, ggml_cpy(ctx, kc, k_dst));
    ggml_build_forward_expand(graph, ggml_cpy(ctx, vc, v_dst));
  }
  return result;
}

}  // namespace earshot::whisper::detail

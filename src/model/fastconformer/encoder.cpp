#include "model/fastconformer/encoder.h"

#include <ggml.h>

#include <cmath>

#include "common/error.h"

namespace earshot::fastconformer {
namespace {

constexpr int kMaxNodes = 16384;

ggml_tensor* layer_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, ggml_tensor* b, float eps) {
  return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
}

// Half-step macaron FFN: x + 0.5 * W2 silu(W1 LN(x)).
ggml_tensor* half_ffn(ggml_context* ctx, ggml_tensor* x, ggml_tensor* nw, ggml_tensor* nb, ggml_tensor* w1,
                      ggml_tensor* w2, float eps) {
  ggml_tensor* h = ggml_mul_mat(ctx, w2, ggml_silu(ctx, ggml_mul_mat(ctx, w1, layer_norm(ctx, x, nw, nb, eps))));
  return ggml_add(ctx, x, ggml_scale(ctx, h, 0.5f));
}

ggml_tensor* self_attention(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* x, ggml_tensor* pos_emb,
                            int T) {
  const int H = hp.n_head, dh = hp.d_head();
  ggml_tensor* q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.q_w, x), dh, H, T);
  ggml_tensor* k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.k_w, x), dh, H, T);
  ggml_tensor* v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.v_w, x), dh, H, T);
  // Content term (q + u) . k, and position term (q + v) . p over the 2T-1 relative positions.
  ggml_tensor* qu = ggml_permute(ctx, ggml_add(ctx, q, l.pos_bias_u), 0, 2, 1, 3);  // [dh, T, H]
  ggml_tensor* qv = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, l.pos_bias_v), 0, 2, 1, 3));
  ggml_tensor* content = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), qu);  // [T_k, T_q, H]
  ggml_tensor* p = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, l.pos_w, pos_emb), dh, H, 2 * T - 1);
  p = ggml_cont(ctx, ggml_permute(ctx, p, 0, 2, 1, 3));  // [dh, 2T-1, H]
  ggml_tensor* raw = ggml_mul_mat(ctx, p, qv);           // [2T-1, T_q, H]: column j is position T-1-j
  // Relative shift: score(k, i) takes column j = T-1-i+k (relative position i-k),
  // a view whose rows step one element less than raw's.
  ggml_tensor* shifted = ggml_view_3d(ctx, raw, T, T, H, raw->nb[1] - raw->nb[0], raw->nb[2], (T - 1) * raw->nb[0]);
  ggml_tensor* scores = ggml_add(ctx, content, ggml_cont(ctx, shifted));
  ggml_tensor* probs = ggml_soft_max(ctx, ggml_scale(ctx, scores, 1.0f / std::sqrt(static_cast<float>(dh))));
  ggml_tensor* vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));  // [T, dh, H]
  ggml_tensor* out = ggml_mul_mat(ctx, vt, probs);                     // [dh, T, H]
  out = ggml_cont_2d(ctx, ggml_permute(ctx, out, 0, 2, 1, 3), hp.n_state, T);
  return ggml_mul_mat(ctx, l.out_w, out);
}

ggml_tensor* conv_module(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* x, float bn_eps) {
  const int d = hp.n_state, pad = (hp.n_conv_kernel - 1) / 2;
  ggml_tensor* h = ggml_mul_mat(ctx, l.pw1_w, layer_norm(ctx, x, l.norm_conv_w, l.norm_conv_b, hp.eps));  // [2d, T]
  ggml_tensor* signal = ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], 0);
  ggml_tensor* gate = ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], d * h->nb[0]);
  h = ggml_mul(ctx, signal, ggml_sigmoid(ctx, gate));  // GLU
  // Depthwise conv over time: ssm_conv reads [time + K - 1, channels].
  h = ggml_pad_ext(ctx, ggml_cont(ctx, ggml_transpose(ctx, h)), pad, pad, 0, 0, 0, 0, 0, 0);
  h = ggml_ssm_conv(ctx, h, l.dw_w);  // [d, T]
  ggml_tensor* std_dev = ggml_sqrt(ctx, bn_eps != 0 ? ggml_scale_bias(ctx, l.bn_var, 1.0f, bn_eps) : l.bn_var);
  h = ggml_div(ctx, ggml_sub(ctx, h, l.bn_mean), std_dev);
  h = ggml_silu(ctx, ggml_add(ctx, ggml_mul(ctx, h, l.bn_w), l.bn_b));
  return ggml_mul_mat(ctx, l.pw2_w, h);
}

}  // namespace

std::vector<float> relative_positions(int T, int d) {
  std::vector<float> freqs(d / 2);
  for (int k = 0; k < d / 2; ++k) freqs[k] = std::exp(-(static_cast<float>(2 * k) * std::log(10000.0f) / d));
  std::vector<float> pe(static_cast<size_t>(2 * T - 1) * d);
  for (int j = 0; j < 2 * T - 1; ++j) {
    const float position = static_cast<float>(T - 1 - j);
    for (int k = 0; k < d / 2; ++k) {
      const float theta = freqs[k] * position;
      pe[static_cast<size_t>(j) * d + 2 * k] = std::sin(theta);
      pe[static_cast<size_t>(j) * d + 2 * k + 1] = std::cos(theta);
    }
  }
  return pe;
}

Encoder::Encoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options)
    : model_(std::move(model)), backend_(backend), options_(options) {
  alloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_));
  meta_.resize(ggml_tensor_overhead() * kMaxNodes + ggml_graph_overhead_custom(kMaxNodes, false));
}

Encoder::~Encoder() { ggml_gallocr_free(alloc_); }

EncoderOutput Encoder::encode(std::span<const float> mel, int n_mel_frames) {
  const Hparams& hp = model_->hparams();
  const Model& m = *model_;
  if (n_mel_frames < 1 || mel.size() != static_cast<size_t>(n_mel_frames) * hp.n_mels)
    throw Error(ErrorCode::kInvalidArgument, "the encoder takes a non-empty [frames][" + std::to_string(hp.n_mels) +
                                                 "] mel; got " + std::to_string(mel.size()) + " values for " +
                                                 std::to_string(n_mel_frames) + " frames");
  ggml_init_params params{meta_.size(), meta_.data(), true};
  ggml_context_ptr guard{ggml_init(params)};
  ggml_context* ctx = guard.get();
  if (!ctx) throw Error(ErrorCode::kInternal, "ggml_init failed for the encoder graph");
  ggml_cgraph* graph = ggml_new_graph_custom(ctx, kMaxNodes, false);

  ggml_tensor* input = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, hp.n_mels, n_mel_frames, 1, 1);
  ggml_set_input(input);
  // Subsampling: conv 3x3/2 + ReLU, then twice (depthwise 3x3/2, pointwise 1x1, ReLU).
  ggml_tensor* x =
      ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.pre_conv_w[0], input, 2, 2, 1, 1, 1, 1), m.pre_conv_b[0]));
  for (int stage = 0; stage < 2; ++stage) {
    const int dw = 1 + 2 * stage, pw = 2 + 2 * stage;
    x = ggml_add(ctx, ggml_conv_2d_dw_direct(ctx, m.pre_conv_w[dw], x, 2, 2, 1, 1, 1, 1), m.pre_conv_b[dw]);
    x = ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.pre_conv_w[pw], x, 1, 1, 0, 0, 1, 1), m.pre_conv_b[pw]));
  }
  // [freq, time, channels] -> [freq * channels, time] (NeMo flattens channels-major), then the linear.
  x = ggml_cont(ctx, ggml_permute(ctx, x, 0, 2, 1, 3));
  const int T = static_cast<int>(x->ne[2]);
  x = ggml_reshape_2d(ctx, x, x->ne[0] * x->ne[1], T);
  x = ggml_add(ctx, ggml_mul_mat(ctx, m.pre_out_w, x), m.pre_out_b);
  if (hp.xscaling) x = ggml_scale(ctx, x, std::sqrt(static_cast<float>(hp.n_state)));

  ggml_tensor* pos_emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.n_state, 2 * T - 1);
  ggml_set_input(pos_emb);
  for (const Layer& l : m.layers) {
    x = half_ffn(ctx, x, l.norm_ff1_w, l.norm_ff1_b, l.ff1_w1, l.ff1_w2, hp.eps);
    x = ggml_add(ctx, x,
                 self_attention(ctx, hp, l, layer_norm(ctx, x, l.norm_att_w, l.norm_att_b, hp.eps), pos_emb, T));
    x = ggml_add(ctx, x, conv_module(ctx, hp, l, x, options_.batch_norm_eps));
    x = half_ffn(ctx, x, l.norm_ff2_w, l.norm_ff2_b, l.ff2_w1, l.ff2_w2, hp.eps);
    x = layer_norm(ctx, x, l.norm_out_w, l.norm_out_b, hp.eps);
  }
  ggml_set_output(x);
  ggml_build_forward_expand(graph, x);
  if (!ggml_gallocr_alloc_graph(alloc_, graph))
    throw Error(ErrorCode::kInternal,
                "cannot allocate the encoder graph for " + std::to_string(n_mel_frames) + " mel frames");
  ggml_backend_tensor_set(input, mel.data(), 0, mel.size() * sizeof(float));
  const std::vector<float> pe = relative_positions(T, hp.n_state);
  ggml_backend_tensor_set(pos_emb, pe.data(), 0, pe.size() * sizeof(float));
  if (ggml_backend_graph_compute(backend_, graph) != GGML_STATUS_SUCCESS)
    throw Error(ErrorCode::kInternal, "the encoder graph failed to compute");
  EncoderOutput out;
  out.n_frames = T;
  out.n_state = hp.n_state;
  out.data.resize(static_cast<size_t>(T) * hp.n_state);
  ggml_backend_tensor_get(x, out.data.data(), 0, out.data.size() * sizeof(float));
  return out;
}

}  // namespace earshot::fastconformer

#include "model/fastconformer/encoder.h"

#include <ggml.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/fastconformer/conformer_blocks.h"
#include "model/runtime/device.h"

namespace earshot::fastconformer {
namespace {

constexpr int kMaxNodes = 16384;

// A stride-2 3x3 conv of the f16 subsampling (ggml_conv_2d, its im2col in f16 as
// libparakeet's), NeMo's CausalConv2D (pad 2 | 1 on both axes) or a symmetric one
// (pad 1): [freq, time, channels, N]. The causal one runs as the convs' own
// padding of 2 on both sides, which skip (depthwise) or zero (im2col) the taps
// outside the input: its outputs are the causal conv's, read from the same
// inputs, plus one more at the end of an axis of odd length, left out by a view
// (no padded copy of the input).
ggml_tensor* subsampling_conv(ggml_context* ctx, const Hparams& hp, ggml_tensor* w, ggml_tensor* x, bool depthwise) {
  const int pad = hp.causal_subsampling ? 2 : 1;
  ggml_tensor* y = depthwise ? ggml_conv_2d_dw_direct(ctx, w, x, 2, 2, pad, pad, 1, 1)
                             : ggml_conv_2d(ctx, w, x, 2, 2, pad, pad, 1, 1);
  if (!hp.causal_subsampling) return y;
  const int64_t ow = x->ne[0] / 2 + 1, oh = x->ne[1] / 2 + 1;  // (n + 2 + 1 - 3) / 2 + 1
  if (y->ne[0] == ow && y->ne[1] == oh) return y;
  return ggml_view_4d(ctx, y, ow, oh, y->ne[2], y->ne[3], y->nb[1], y->nb[2], y->nb[3], 0);
}

// x [C, W, H, N] (a view: the causal convs' extra outputs left out) + b [1, 1, C].
ggml_tensor* add_channels_first(ggml_context* ctx, ggml_tensor* x, ggml_tensor* b) {
  return ggml_add(ctx, x, ggml_reshape_1d(ctx, b, ggml_nelements(b)));
}

// The causal convs' outputs of an input of w x h (the first of each axis's
// outputs, as subsampling_conv), of y [C, OW, OH, N].
ggml_tensor* causal_outputs(ggml_context* ctx, const Hparams& hp, ggml_tensor* y, int64_t w, int64_t h) {
  if (!hp.causal_subsampling) return y;
  const int64_t ow = w / 2 + 1, oh = h / 2 + 1;
  if (y->ne[1] == ow && y->ne[2] == oh) return y;
  return ggml_view_4d(ctx, y, y->ne[0], ow, oh, y->ne[3], y->nb[1], y->nb[2], y->nb[3], 0);
}

ggml_tensor* f32_weight(ggml_context* ctx, ggml_tensor* w) {
  return w->type == GGML_TYPE_F32 ? w : ggml_cast(ctx, w, GGML_TYPE_F32);
}

// The subsampling in f32 with the channels first in memory ([channels, freq,
// time, N]): the first conv is one product of its kernel and the mel's im2col,
// the depthwise convs run on ggml's channels-contiguous kernel (SIMD over the
// channels; the freq-first one is scalar) and the pointwise convs are plain
// products, without an im2col; the products on mm. The same sums as freq-first
// up to rounding (the depthwise taps in the same order, with fused multiply-adds;
// the products with the kernel as their first operand): measured at most 0.07 on
// the 0.6B q8_0 encoder's output (its values up to 8), where the activations' q8
// rounding carries such differences through 24 layers. -> [freq * channels,
// time * N], as build_subsampling_convs.
ggml_tensor* subsampling_channels_first(ggml_context* ctx, const Model& m, ggml_tensor* mel, runtime::MatMul mm) {
  const Hparams& hp = m.hparams();
  const int pad = hp.causal_subsampling ? 2 : 1;
  // Conv 3x3/2 + ReLU: [KW * KH, OW, OH, N] columns times the kernel [KW * KH, C].
  ggml_tensor* w0 = m.pre_conv_w[0];
  ggml_tensor* cols = ggml_im2col(ctx, w0, mel, 2, 2, pad, pad, 1, 1, true, GGML_TYPE_F32);
  ggml_tensor* x = mm(ctx, f32_weight(ctx, ggml_reshape_2d(ctx, w0, w0->ne[0] * w0->ne[1] * w0->ne[2], w0->ne[3])),
                      ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2] * cols->ne[3]));
  x = ggml_reshape_4d(ctx, x, x->ne[0], cols->ne[1], cols->ne[2], cols->ne[3]);
  x = ggml_relu(ctx, add_channels_first(ctx, causal_outputs(ctx, hp, x, mel->ne[0], mel->ne[1]), m.pre_conv_b[0]));
  for (int stage = 0; stage < 2; ++stage) {
    const int dw = 1 + 2 * stage, pw = 2 + 2 * stage;
    const int64_t C = x->ne[0], W = x->ne[1], H = x->ne[2];
    // The depthwise kernel [KW, KH, 1, C] as ggml's channels-contiguous conv reads it: [C, KW, KH] in memory.
    ggml_tensor* k = m.pre_conv_w[dw];
    ggml_tensor* kc = ggml_cont(ctx, ggml_permute(ctx, f32_weight(ctx, k), 1, 2, 3, 0));  // [C, KW, KH, 1]
    kc = ggml_permute(ctx, ggml_view_4d(ctx, kc, C, k->ne[0], k->ne[1], 1, kc->nb[1], kc->nb[2], kc->nb[0], 0), 3, 0, 1,
                      2);  // [KW, KH, 1, C], channels contiguous
    // x [C, W, H, N] seen as [W, H, C, N] with contiguous channels; the conv's output likewise.
    ggml_tensor* y = ggml_conv_2d_dw_direct(ctx, kc, ggml_permute(ctx, x, 2, 0, 1, 3), 2, 2, pad, pad, 1, 1);
    y = ggml_permute(ctx, y, 1, 2, 0, 3);  // [C, OW, OH, N]
    x = add_channels_first(ctx, causal_outputs(ctx, hp, y, W, H), m.pre_conv_b[dw]);
    // Pointwise 1x1: the kernel [1, 1, C, C'] as a [C, C'] matrix.
    ggml_tensor* wp = m.pre_conv_w[pw];
    ggml_tensor* p = mm(ctx, f32_weight(ctx, ggml_reshape_2d(ctx, wp, wp->ne[2], wp->ne[3])),
                        ggml_reshape_2d(ctx, x, x->ne[0], x->ne[1] * x->ne[2] * x->ne[3]));
    x = ggml_relu(ctx, add_channels_first(ctx, ggml_reshape_4d(ctx, p, p->ne[0], x->ne[1], x->ne[2], x->ne[3]),
                                          m.pre_conv_b[pw]));
  }
  // [C, freq, time, N] -> [freq * C, time * N] (NeMo flattens channels-major; the N
  // sequences' frames one after the other).
  x = ggml_cont(ctx, ggml_permute(ctx, x, 1, 0, 2, 3));
  return ggml_reshape_2d(ctx, x, x->ne[0] * x->ne[1], x->ne[2] * x->ne[3]);
}

}  // namespace

ggml_tensor* half_ffn(ggml_context* ctx, ggml_tensor* x, ggml_tensor* nw, ggml_tensor* nb, ggml_tensor* w1,
                      ggml_tensor* w2, float eps, runtime::MatMul mm, ggml_tensor* b1, ggml_tensor* b2) {
  ggml_tensor* h = linear(ctx, mm, w2, b2, ggml_silu(ctx, linear(ctx, mm, w1, b1, layer_norm(ctx, x, nw, nb, eps))));
  return ggml_add(ctx, x, ggml_scale(ctx, h, 0.5f));
}

ggml_tensor* attention_heads(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* q, ggml_tensor* k,
                             ggml_tensor* v, ggml_tensor* p, ggml_tensor* mask) {
  const int H = hp.n_head, dh = hp.d_head();
  const int Tq = static_cast<int>(q->ne[2]), Tk = static_cast<int>(k->ne[2]), G = static_cast<int>(q->ne[3]);
  // Content term (q + u) . k, and position term (q + v) . p over the Tk + Tq - 1 relative positions.
  ggml_tensor* qu = ggml_permute(ctx, ggml_add(ctx, q, l.pos_bias_u), 0, 2, 1, 3);  // [dh, Tq, H]
  ggml_tensor* qv = ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, l.pos_bias_v), 0, 2, 1, 3));
  ggml_tensor* content = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), qu);  // [Tk, Tq, H]
  p = ggml_cont(ctx, ggml_permute(ctx, p, 0, 2, 1, 3));                            // [dh, n_pos, H]
  ggml_tensor* raw = ggml_mul_mat(ctx, p, qv);  // [n_pos, Tq, H]: column j is position Tk-1-j
  // Relative shift: query i (key index Tk-Tq+i) and key k are Tk-Tq+i-k apart, column
  // j = Tq-1-i+k: a view whose rows step one element less than raw's.
  ggml_tensor* shifted =
      ggml_view_4d(ctx, raw, Tk, Tq, H, G, raw->nb[1] - raw->nb[0], raw->nb[2], raw->nb[3], (Tq - 1) * raw->nb[0]);
  ggml_tensor* scores = ggml_add(ctx, content, ggml_cont(ctx, shifted));
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  // NeMo fills masked scores with -10000 and zeroes their probabilities: -inf does both.
  ggml_tensor* probs =
      mask ? ggml_soft_max_ext(ctx, scores, mask, scale, 0.0f) : ggml_soft_max(ctx, ggml_scale(ctx, scores, scale));
  ggml_tensor* vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));  // [Tk, dh, H]
  ggml_tensor* out = ggml_mul_mat(ctx, vt, probs);                     // [dh, Tq, H]
  return ggml_cont_2d(ctx, ggml_permute(ctx, out, 0, 2, 1, 3), hp.n_state, static_cast<int64_t>(Tq) * G);
}

ggml_tensor* conv_glu(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* x, runtime::MatMul mm) {
  const int d = hp.n_state;
  ggml_tensor* h =
      linear(ctx, mm, l.pw1_w, l.pw1_b, layer_norm(ctx, x, l.norm_conv_w, l.norm_conv_b, hp.eps));  // [2d, T]
  ggml_tensor* signal = ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], 0);
  ggml_tensor* gate = ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], d * h->nb[0]);
  return ggml_mul(ctx, signal, ggml_sigmoid(ctx, gate));  // GLU
}

ggml_tensor* depthwise_conv(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* h, ggml_tensor* cache,
                            ggml_tensor** next_cache) {
  const int d = hp.n_state, K = hp.n_conv_kernel;
  // Depthwise conv over time: ssm_conv reads [time + K - 1, channels]. Causal
  // (NeMo's CausalConv1D): K - 1 frames on the left, the previous inputs when streaming.
  h = ggml_cont(ctx, ggml_transpose(ctx, h));
  const int T = static_cast<int>(h->ne[0]);
  if (cache) {
    h = ggml_concat(ctx, cache, h, 0);
  } else if (hp.causal_conv) {
    h = ggml_pad_ext(ctx, h, K - 1, 0, 0, 0, 0, 0, 0, 0);
  } else {
    h = ggml_pad_ext(ctx, h, (K - 1) / 2, (K - 1) / 2, 0, 0, 0, 0, 0, 0);
  }
  if (next_cache)
    *next_cache = ggml_cont(ctx, ggml_view_3d(ctx, h, K - 1, d, h->ne[2], h->nb[1], h->nb[2], T * h->nb[0]));
  ggml_tensor* out = ggml_ssm_conv(ctx, h, l.dw_w);  // [d, T, sequences]
  return l.dw_b ? ggml_add(ctx, out, l.dw_b) : out;
}

ggml_tensor* conv_out(ggml_context* ctx, const Hparams& hp, const Layer& l, ggml_tensor* h, float bn_eps,
                      runtime::MatMul mm) {
  if (hp.conv_norm == ConvNorm::kLayerNorm) {
    h = layer_norm(ctx, h, l.bn_w, l.bn_b, hp.eps);
  } else {
    ggml_tensor* std_dev = ggml_sqrt(ctx, bn_eps != 0 ? ggml_scale_bias(ctx, l.bn_var, 1.0f, bn_eps) : l.bn_var);
    h = ggml_div(ctx, ggml_sub(ctx, h, l.bn_mean), std_dev);
    h = ggml_add(ctx, ggml_mul(ctx, h, l.bn_w), l.bn_b);
  }
  return linear(ctx, mm, l.pw2_w, l.pw2_b, ggml_silu(ctx, h));
}

ggml_tensor* build_subsampling_convs(ggml_context* ctx, const Model& m, ggml_tensor* mel, bool f16,
                                     runtime::MatMul mm) {
  const Hparams& hp = m.hparams();
  if (!f16) return subsampling_channels_first(ctx, m, mel, mm);
  // Conv 3x3/2 + ReLU, then twice (depthwise 3x3/2, pointwise 1x1, ReLU).
  ggml_tensor* x =
      ggml_relu(ctx, ggml_add(ctx, subsampling_conv(ctx, hp, m.pre_conv_w[0], mel, false), m.pre_conv_b[0]));
  for (int stage = 0; stage < 2; ++stage) {
    const int dw = 1 + 2 * stage, pw = 2 + 2 * stage;
    x = ggml_add(ctx, subsampling_conv(ctx, hp, m.pre_conv_w[dw], x, true), m.pre_conv_b[dw]);
    x = ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.pre_conv_w[pw], x, 1, 1, 0, 0, 1, 1), m.pre_conv_b[pw]));
  }
  // [freq, time, channels, N] -> [freq * channels, time * N] (NeMo flattens
  // channels-major; the N sequences' frames one after the other).
  x = ggml_cont(ctx, ggml_permute(ctx, x, 0, 2, 1, 3));
  return ggml_reshape_2d(ctx, x, x->ne[0] * x->ne[1], x->ne[2] * x->ne[3]);
}

ggml_tensor* subsampling_out(ggml_context* ctx, const Model& m, ggml_tensor* x, runtime::MatMul mm) {
  const Hparams& hp = m.hparams();
  x = mm.affine(ctx, m.pre_out_w, x, m.pre_out_b);
  if (hp.xscaling) x = ggml_scale(ctx, x, std::sqrt(static_cast<float>(hp.n_state)));
  return x;
}

ggml_tensor* build_subsampling(ggml_context* ctx, const Model& m, ggml_tensor* mel, bool f16, runtime::MatMul mm) {
  return subsampling_out(ctx, m, build_subsampling_convs(ctx, m, mel, f16), mm);  // the convs on ggml's kernels
}

ggml_tensor* build_layer(ggml_context* ctx, const Model& m, const Layer& l, ggml_tensor* x, ggml_tensor* pos_emb,
                         ggml_tensor* mask, float bn_eps, runtime::MatMul mm) {
  const Hparams& hp = m.hparams();
  const int H = hp.n_head, dh = hp.d_head(), T = static_cast<int>(x->ne[1]);
  x = half_ffn(ctx, x, l.norm_ff1_w, l.norm_ff1_b, l.ff1_w1, l.ff1_w2, hp.eps, mm, l.ff1_b1, l.ff1_b2);
  ggml_tensor* xa = layer_norm(ctx, x, l.norm_att_w, l.norm_att_b, hp.eps);
  ggml_tensor* q = linear(ctx, mm, l.q_w, l.q_b, xa);
  ggml_tensor* k = linear(ctx, mm, l.k_w, l.k_b, xa);
  ggml_tensor* v = linear(ctx, mm, l.v_w, l.v_b, xa);
  ggml_tensor* p = mm(ctx, l.pos_w, pos_emb);
  ggml_tensor* heads =
      mm.openblas
          ? runtime::blas_relpos_attention(ctx, q, k, v, p, l.pos_bias_u, l.pos_bias_v, mask, H)
          : attention_heads(ctx, hp, l, ggml_reshape_3d(ctx, q, dh, H, T), ggml_reshape_3d(ctx, k, dh, H, T),
                            ggml_reshape_3d(ctx, v, dh, H, T), ggml_reshape_3d(ctx, p, dh, H, pos_emb->ne[1]), mask);
  x = ggml_add(ctx, x, linear(ctx, mm, l.out_w, l.out_b, heads));
  ggml_tensor* h = depthwise_conv(ctx, hp, l, conv_glu(ctx, hp, l, x, mm), nullptr, nullptr);
  x = ggml_add(ctx, x, conv_out(ctx, hp, l, h, bn_eps, mm));
  x = half_ffn(ctx, x, l.norm_ff2_w, l.norm_ff2_b, l.ff2_w1, l.ff2_w2, hp.eps, mm, l.ff2_b1, l.ff2_b2);
  return layer_norm(ctx, x, l.norm_out_w, l.norm_out_b, hp.eps);
}

std::vector<float> relative_positions(int top, int count, int d) {
  std::vector<float> freqs(d / 2);
  for (int k = 0; k < d / 2; ++k) freqs[k] = std::exp(-(static_cast<float>(2 * k) * std::log(10000.0f) / d));
  std::vector<float> pe(static_cast<size_t>(count) * d);
  for (int j = 0; j < count; ++j) {
    const float position = static_cast<float>(top - j);
    for (int k = 0; k < d / 2; ++k) {
      const float theta = freqs[k] * position;
      pe[static_cast<size_t>(j) * d + 2 * k] = std::sin(theta);
      pe[static_cast<size_t>(j) * d + 2 * k + 1] = std::cos(theta);
    }
  }
  return pe;
}

std::vector<float> relative_positions(int T, int d) { return relative_positions(T - 1, 2 * T - 1, d); }

int resolve_right_context(const Hparams& hp, std::optional<int> right) {
  if (!right) return hp.att_right;
  if (*right != hp.att_right && !hp.supports_right_context(*right)) {
    std::string options;
    for (int r : hp.att_right_options.empty() ? std::vector<int>{hp.att_right} : hp.att_right_options)
      options += (options.empty() ? "" : ", ") + std::to_string(r);
    throw Error(ErrorCode::kInvalidArgument,
                "right context " + std::to_string(*right) + " frames is not one the model supports (" + options + ")");
  }
  return *right;
}

std::vector<float> attention_mask(const Hparams& hp, int right, int T) {
  const int left = hp.att_left;
  std::vector<float> mask(static_cast<size_t>(T) * T, 0.0f);
  const bool chunked = hp.att_style == AttentionStyle::kChunkedLimited && right >= 0;
  // NeMo's chunked_limited: chunks of right + 1 frames, each seeing itself and
  // left / (right + 1) whole chunks before it (unlimited left: all of them).
  const int chunk = right + 1, left_chunks = left >= 0 ? left / std::max(chunk, 1) : T;
  for (int i = 0; i < T; ++i) {
    for (int j = 0; j < T; ++j) {
      bool visible;
      if (chunked) {
        const int diff = i / chunk - j / chunk;
        visible = diff >= 0 && diff <= left_chunks;
      } else {
        visible = (left < 0 || i - j <= left) && (right < 0 || j - i <= right);
      }
      if (!visible) mask[static_cast<size_t>(i) * T + j] = -INFINITY;
    }
  }
  return mask;
}

Encoder::Encoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options)
    : model_(std::move(model)), backend_(backend), options_(options) {
  right_ = resolve_right_context(model_->hparams(), options_.right_context);
  products_ = runtime::encoder_products(options_.cpu_kernels, runtime::is_cpu(runtime::device_of(backend_)));
  runner_ = std::make_unique<runtime::GraphRunner>(backend_, "encoder");
}

Encoder::~Encoder() = default;

EncoderOutput Encoder::encode(std::span<const float> mel, int n_mel_frames) {
  const Hparams& hp = model_->hparams();
  const Model& m = *model_;
  if (n_mel_frames < 1 || mel.size() != static_cast<size_t>(n_mel_frames) * hp.n_mels)
    throw Error(ErrorCode::kInvalidArgument, "the encoder takes a non-empty [frames][" + std::to_string(hp.n_mels) +
                                                 "] mel; got " + std::to_string(mel.size()) + " values for " +
                                                 std::to_string(n_mel_frames) + " frames");
  const runtime::GraphRunner::Graph g = runner_->begin(kMaxNodes);
  ggml_context* ctx = g.ctx();

  ggml_tensor* input = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, hp.n_mels, n_mel_frames, 1, 1);
  ggml_set_input(input);
  const runtime::MatMul mm = products_;
  ggml_tensor* x = build_subsampling(ctx, m, input, options_.f16_subsampling, mm);
  const int T = static_cast<int>(x->ne[1]);
  ggml_tensor* pos_emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.n_state, 2 * T - 1);
  ggml_set_input(pos_emb);
  // Full attention computes without a mask (the path libparakeet's parity holds on).
  const bool limited = hp.att_left >= 0 || right_ >= 0;
  ggml_tensor* mask = limited ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, T, T) : nullptr;
  if (mask) ggml_set_input(mask);
  for (const Layer& l : m.layers) x = build_layer(ctx, m, l, x, pos_emb, mask, options_.batch_norm_eps, mm);
  ggml_set_output(x);
  ggml_build_forward_expand(g.graph(), x);
  runner_->allocate(g, std::to_string(n_mel_frames) + " mel frames");
  runtime::set_input(input, mel);
  runtime::set_input(pos_emb, relative_positions(T, hp.n_state));
  if (mask) runtime::set_input(mask, attention_mask(hp, right_, T));
  runner_->compute(g);
  EncoderOutput out;
  out.n_frames = T;
  out.n_state = hp.n_state;
  out.data = runtime::read_output(x);
  return out;
}

}  // namespace earshot::fastconformer

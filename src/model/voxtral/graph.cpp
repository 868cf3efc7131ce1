#include "model/voxtral/graph.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/runtime/amx.h"
#include "model/runtime/gemv_ops.h"
#include "model/runtime/openblas_ops.h"
#include "model/runtime/q8_gemm.h"
#include "model/runtime/rows_ops.h"

namespace earshot::voxtral {
namespace {

// A weight product: a Q8_0 weight on the int8 op where asked (GraphKernels::int8);
// an F16, F32, Q8_0, Q4_K or Q6_K weight on the few-row op where asked (GraphKernels::rows); a
// few rows against a float weight on the CPU keep their f32 activations
// (gemv_mul_mat); the rest is ggml's (AMX where the weight lives there).
ggml_tensor* product(ggml_context* ctx, ggml_tensor* w, ggml_tensor* x, GraphKernels k) {
  if (k.cpu && k.int8 && runtime::q8_gemm_available() && runtime::q8_gemm_supports(w, x))
    return runtime::q8_mul_mat(ctx, w, x);
  if (k.cpu && k.rows && runtime::rows_supports(w, x)) return runtime::rows_mul_mat(ctx, w, x);
  if (k.cpu && runtime::gemv_supports(w, x)) return runtime::gemv_mul_mat(ctx, w, x);
  return runtime::mul_mat(ctx, w, x);
}

ggml_tensor* rms_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* w, float eps) {
  return ggml_mul(ctx, ggml_rms_norm(ctx, x, eps), w);
}

ggml_tensor* rope(ggml_context* ctx, ggml_tensor* x, ggml_tensor* positions, int head_dim, float theta) {
  return ggml_rope_ext(ctx, x, positions, nullptr, head_dim, GGML_ROPE_TYPE_NEOX, 0, theta, 1.0f, 0.0f, 1.0f, 32.0f,
                       1.0f);
}

// The rows from which the attention goes to OpenBLAS (GraphKernels::openblas_attention).
constexpr int64_t kBlasAttentionRows = 8;

// Sliding-window attention of n queries q [head_dim, n_head, n] against a ring
// (its K/V already holding them): [head_dim * n_head, n].
ggml_tensor* ring_attention(ggml_context* ctx, ggml_tensor* q, const KvRing& ring, int layer, int head_dim,
                            ggml_tensor* mask, GraphKernels k) {
  const int64_t n = q->ne[2], n_head = q->ne[1];
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  ggml_tensor* qp = ggml_permute(ctx, q, 0, 2, 1, 3);  // [head_dim, n, n_head]
  if (k.cpu && k.openblas_attention && n >= kBlasAttentionRows) {
    // sgemm multiplies every cell's values, masked or not: only the cells written
    // in this context (those before the ring wraps), whose values are finite.
    const int64_t used = std::min<int64_t>(ring.positions() + n, ring.capacity());
    auto cells = [&](ggml_tensor* all) {
      return ggml_view_3d(ctx, all, all->ne[0], used, all->ne[2], all->nb[1], all->nb[2], 0);
    };
    ggml_tensor* used_mask = ggml_view_2d(ctx, mask, used, mask->ne[1], mask->nb[1], 0);
    return runtime::blas_masked_attention(ctx, qp, cells(ring.k_view(ctx, layer, head_dim)),
                                          cells(ring.v_view(ctx, layer, head_dim)), /*v_trans=*/false,
                                          ggml_cast(ctx, used_mask, GGML_TYPE_F32), scale);
  }
  ggml_tensor* out = ggml_flash_attn_ext(ctx, qp, ring.k_view(ctx, layer, head_dim), ring.v_view(ctx, layer, head_dim),
                                         mask, scale, 0.0f, 0.0f);
  return ggml_reshape_2d(ctx, out, head_dim * n_head, n);  // [head_dim, n_head, n] -> rows per position
}

}  // namespace

EncoderGraph build_encoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model, const KvRing& ring, int slots,
                           GraphKernels kernels) {
  kernels.int8 = true;   // the encoder's products: many rows (GraphKernels::int8)
  kernels.rows = false;  // the few-row op is the decoder's
  const Hparams& hp = model.hparams();
  const int frames = hp.mel_frames_per_slot * slots;  // mel frames in
  const int n = frames / 2;                           // encoder frames out
  EncoderGraph g;
  g.mel = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, frames + 2, hp.n_mels);
  ggml_set_input(g.mel);
  g.conv0_prev = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.enc_d, 1);
  ggml_set_input(g.conv0_prev);
  g.positions = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
  ggml_set_input(g.positions);
  g.mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, ring.capacity(), n);
  ggml_set_input(g.mask);

  // The causal conv stem: k = 3, the left context carried in (2 mel frames, 1
  // conv0 frame), so each output frame is the offline one.
  ggml_tensor* w0 = ggml_reshape_2d(ctx, model.conv0_w, 3 * hp.n_mels, hp.enc_d);
  ggml_tensor* cols0 =
      ggml_im2col(ctx, model.conv0_w, g.mel, 1, 0, 0, 0, 1, 0, false, GGML_TYPE_F32);  // [3 n_mels, frames]
  ggml_tensor* h0 = ggml_gelu_erf(
      ctx, ggml_add(ctx, product(ctx, w0, ggml_reshape_2d(ctx, cols0, 3 * hp.n_mels, frames), kernels), model.conv0_b));
  g.conv0_last =
      ggml_cont(ctx, ggml_view_2d(ctx, h0, hp.enc_d, 1, h0->nb[1], static_cast<size_t>(frames - 1) * h0->nb[1]));
  ggml_tensor* in1 = ggml_cont(ctx, ggml_transpose(ctx, ggml_concat(ctx, g.conv0_prev, h0, 1)));  // [frames + 1, enc_d]
  ggml_tensor* w1 = ggml_reshape_2d(ctx, model.conv1_w, 3 * hp.enc_d, hp.enc_d);
  ggml_tensor* cols1 = ggml_im2col(ctx, model.conv1_w, in1, 2, 0, 0, 0, 1, 0, false, GGML_TYPE_F32);  // [3 enc_d, n]
  ggml_tensor* x = ggml_gelu_erf(
      ctx, ggml_add(ctx, product(ctx, w1, ggml_reshape_2d(ctx, cols1, 3 * hp.enc_d, n), kernels), model.conv1_b));

  for (int l = 0; l < hp.enc_n_layer; ++l) {
    const EncoderLayer& L = model.enc_layers[l];
    ggml_tensor* h = rms_norm(ctx, x, L.norm_attn, hp.enc_eps);
    ggml_tensor* q = ggml_add(ctx, product(ctx, L.q_w, h, kernels), L.q_b);
    ggml_tensor* k = product(ctx, L.k_w, h, kernels);
    ggml_tensor* v = ggml_add(ctx, product(ctx, L.v_w, h, kernels), L.v_b);
    q = rope(ctx, ggml_reshape_3d(ctx, q, hp.enc_head_dim, hp.enc_n_head, n), g.positions, hp.enc_head_dim,
             hp.enc_rope_theta);
    k = rope(ctx, ggml_reshape_3d(ctx, k, hp.enc_head_dim, hp.enc_n_head, n), g.positions, hp.enc_head_dim,
             hp.enc_rope_theta);
    ring.store(ctx, graph, l, ggml_reshape_2d(ctx, k, hp.enc_q_dim(), n), v);
    ggml_tensor* attn = ring_attention(ctx, q, ring, l, hp.enc_head_dim, g.mask, kernels);
    x = ggml_add(ctx, x, ggml_add(ctx, product(ctx, L.o_w, attn, kernels), L.o_b));
    h = rms_norm(ctx, x, L.norm_ffn, hp.enc_eps);
    ggml_tensor* gate = ggml_silu(ctx, product(ctx, L.gate_w, h, kernels));
    ggml_tensor* up = product(ctx, L.up_w, h, kernels);
    x = ggml_add(ctx, x, ggml_add(ctx, product(ctx, L.down_w, ggml_mul(ctx, gate, up), kernels), L.down_b));
  }
  x = rms_norm(ctx, x, model.enc_norm, hp.enc_eps);
  // Each slot's `downsample` frames side by side (frame-major rows), then the projector.
  x = ggml_reshape_2d(ctx, ggml_cont(ctx, x), hp.enc_d * hp.downsample, slots);
  x = ggml_gelu_erf(ctx, product(ctx, model.proj1_w, x, kernels));
  g.audio = product(ctx, model.proj2_w, x, kernels);
  ggml_build_forward_expand(graph, g.audio);
  ggml_build_forward_expand(graph, g.conv0_last);
  return g;
}

DecoderGraph build_decoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model,
                           std::span<const DecoderPart> parts, GraphKernels kernels) {
  const Hparams& hp = model.hparams();
  const int n_parts = static_cast<int>(parts.size());
  int total = 0;
  for (const DecoderPart& p : parts) {
    if (n_parts > 1 && p.n != 1)
      throw Error(ErrorCode::kInternal, "voxtral decoder graph: several parts must each add one position");
    total += p.n;
  }
  DecoderGraph g;
  g.tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, total);
  ggml_set_input(g.tokens);
  g.audio = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.d, total);
  ggml_set_input(g.audio);
  g.positions = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, total);
  ggml_set_input(g.positions);
  g.scales = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hp.d, n_parts, hp.n_layer);
  ggml_set_input(g.scales);
  for (const DecoderPart& p : parts) {
    ggml_tensor* m = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, p.ring->capacity(), p.n);
    ggml_set_input(m);
    g.masks.push_back(m);
  }

  // The audio embedding is added to the token's.
  ggml_tensor* x = ggml_add(ctx, ggml_get_rows(ctx, model.tok_embd, g.tokens), g.audio);  // [d, total]
  for (int l = 0; l < hp.n_layer; ++l) {
    const DecoderLayer& L = model.layers[l];
    ggml_tensor* h = rms_norm(ctx, x, L.norm_attn, hp.eps);
    ggml_tensor* q = product(ctx, L.q_w, h, kernels);
    ggml_tensor* k = product(ctx, L.k_w, h, kernels);
    ggml_tensor* v = product(ctx, L.v_w, h, kernels);
    q = rope(ctx, ggml_reshape_3d(ctx, q, hp.head_dim, hp.n_head, total), g.positions, hp.head_dim, hp.rope_theta);
    k = rope(ctx, ggml_reshape_3d(ctx, k, hp.head_dim, hp.n_kv_head, total), g.positions, hp.head_dim, hp.rope_theta);
    k = ggml_reshape_2d(ctx, k, hp.kv_dim(), total);
    ggml_tensor* attn = nullptr;
    int at = 0;
    for (int p = 0; p < n_parts; ++p) {
      const DecoderPart& part = parts[p];
      auto cols = [&](ggml_tensor* t) {
        return ggml_view_2d(ctx, t, t->ne[0], part.n, t->nb[1], static_cast<size_t>(at) * t->nb[1]);
      };
      part.ring->store(ctx, graph, l, cols(k), cols(v));
      ggml_tensor* qp =
          ggml_view_3d(ctx, q, hp.head_dim, hp.n_head, part.n, q->nb[1], q->nb[2], static_cast<size_t>(at) * q->nb[2]);
      ggml_tensor* out = ring_attention(ctx, qp, *part.ring, l, hp.head_dim, g.masks[p], kernels);
      if (n_parts == 1) {
        attn = out;
      } else {
        if (!attn) attn = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.q_dim(), total);
        attn = ggml_set_2d_inplace(ctx, attn, out, attn->nb[1], static_cast<size_t>(at) * attn->nb[1]);
      }
      at += part.n;
    }
    x = ggml_add(ctx, x, product(ctx, L.o_w, attn, kernels));
    h = rms_norm(ctx, x, L.norm_ffn, hp.eps);
    ggml_tensor* scale =
        ggml_view_2d(ctx, g.scales, hp.d, n_parts, g.scales->nb[1], static_cast<size_t>(l) * g.scales->nb[2]);
    h = ggml_mul(ctx, h, scale);  // one part: its [d, 1] broadcast over its positions
    ggml_tensor* gate = ggml_silu(ctx, product(ctx, L.gate_w, h, kernels));
    ggml_tensor* up = product(ctx, L.up_w, h, kernels);
    x = ggml_add(ctx, x, product(ctx, L.down_w, ggml_mul(ctx, gate, up), kernels));
  }
  if (n_parts == 1 && total > 1)  // a prompt: only its last position's logits
    x = ggml_view_2d(ctx, x, hp.d, 1, x->nb[1], static_cast<size_t>(total - 1) * x->nb[1]);
  x = rms_norm(ctx, x, model.out_norm, hp.eps);
  g.logits = product(ctx, model.tok_embd, x, kernels);  // the head is the token embedding
  ggml_build_forward_expand(graph, g.logits);
  return g;
}

// Per layer: ~40 nodes, and on the int8 op a quantise node beside each of its 7 products;
// a decoder graph ~15 more per part (its ring's store and views, its attention).
int encoder_graph_nodes(const Hparams& hp) { return 64 + 56 * hp.enc_n_layer; }

int decoder_graph_nodes(const Hparams& hp, int parts) { return 64 + hp.n_layer * (40 + 20 * parts); }

}  // namespace earshot::voxtral

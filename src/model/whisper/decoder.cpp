// Whisper decoder graph for one step of n_tokens tokens appended to each of
// n_sequences sequences (beams) at once: token + positional embedding, causal
// self-attention over the per-sequence KV cache, cross-attention over the
// precomputed encoder K/V, GELU MLP, final LN and logits against the token
// embedding. The softmaxed cross-attention of the layers with alignment heads is
// kept for the session to copy those heads out.
#include <algorithm>
#include <cmath>

#include "model/runtime/amx.h"
#include "model/whisper/graph.h"
#include "model/whisper/graph_ops.h"

namespace earshot::whisper::detail {

DecoderGraph build_decoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model, const StateTensors& state,
                           const DecoderGraphSpec& spec) {
  const Hparams& hp = model.hparams();
  const Weights& w = model.weights();
  const int n_state = hp.n_text_state;
  const int n_head = hp.n_text_head;
  const int head_dim = n_state / n_head;
  const int n_seq = spec.n_sequences;
  const int n_tokens = spec.n_tokens;
  const int n_kv = spec.n_past + n_tokens;
  const int n_audio = spec.n_audio_ctx;
  const int seq0 = spec.first_sequence;
  const runtime::KvCache& kv = *state.self_kv;
  const int64_t n_rows = static_cast<int64_t>(n_tokens) * n_seq;

  const auto& heads = model.alignment_heads();
  const int n_positions = static_cast<int>(spec.logits_positions.size());

  // The integer inputs, laid out in g.index_values; views of g.indices pick them out.
  DecoderGraph g;
  std::vector<int32_t>& values = g.index_values;
  if (spec.tokens.empty()) {
    values.assign(n_rows, 0);
  } else {
    values = spec.tokens;
  }
  const size_t positions_at = values.size();
  for (int s = 0; s < n_seq; ++s) {
    for (int i = 0; i < n_tokens; ++i) values.push_back(spec.n_past + i);
  }
  // Projecting only the wanted positions: the vocabulary product dominates a step.
  const bool some_positions = n_positions != n_tokens;
  const size_t logit_rows_at = values.size();
  if (some_positions) {
    for (int s = 0; s < n_seq; ++s) {
      for (int p : spec.logits_positions) values.push_back(s * n_tokens + p);
    }
  }
  g.indices = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(values.size()));
  ggml_set_input(g.indices);
  auto indices_view = [&](size_t at, int64_t n) { return ggml_view_1d(ctx, g.indices, n, at * sizeof(int32_t)); };
  if (n_tokens > 1) {
    g.mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_input(g.mask);
  }

  // Same scaling as whisper.cpp: self-attention Q and K each by head_dim^-1/4;
  // cross K was pre-scaled by head_dim^-1/4 and the softmax applies the other factor.
  const float kq_scale = std::pow(static_cast<float>(head_dim), -0.25f);
  const size_t es_cross = ggml_element_size(state.cross_k);

  ggml_tensor* cur = ggml_add(ctx, ggml_get_rows(ctx, w.token_emb, indices_view(0, n_rows)),
                              ggml_get_rows(ctx, w.dec_pos, indices_view(positions_at, n_rows)));
  ggml_tensor* inp = cur;
  g.cross_attention.assign(w.decoder.size(), nullptr);

  for (int il = 0; il < static_cast<int>(w.decoder.size()); ++il) {
    const DecoderLayer& layer = w.decoder[il];

    // Self-attention.
    cur = layer_norm(ctx, inp, layer.attn_ln_w, layer.attn_ln_b);
    ggml_tensor* q =
        ggml_scale(ctx, ggml_add(ctx, runtime::mul_mat(ctx, layer.attn_q_w, cur), layer.attn_q_b), kq_scale);
    ggml_tensor* k = ggml_scale(ctx, runtime::mul_mat(ctx, layer.attn_k_w, cur), kq_scale);
    ggml_tensor* v = ggml_add(ctx, runtime::mul_mat(ctx, layer.attn_v_w, cur), layer.attn_v_b);
    {
      ggml_tensor* k_dst = kv.k_slot(ctx, il, spec.n_past, n_tokens, seq0, n_seq);
      ggml_tensor* v_dst = kv.v_slot(ctx, il, spec.n_past, n_tokens, seq0, n_seq);
      ggml_tensor* v_t = ggml_permute(ctx, ggml_reshape_3d(ctx, v, n_state, n_tokens, n_seq), 1, 0, 2, 3);
      ggml_build_forward_expand(graph, ggml_cpy(ctx, ggml_reshape_3d(ctx, k, n_state, n_tokens, n_seq), k_dst));
      ggml_build_forward_expand(graph, ggml_cpy(ctx, v_t, v_dst));
    }
    ggml_tensor* Q = ggml_permute(ctx, ggml_reshape_4d(ctx, q, head_dim, n_head, n_tokens, n_seq), 0, 2, 1, 3);
    ggml_tensor* K = kv.k_heads(ctx, il, n_kv, n_head, seq0, n_seq);
    ggml_tensor* kq = ggml_mul_mat(ctx, K, Q);  // [n_kv, n_tokens, n_head, n_seq]
    kq = ggml_soft_max_ext(ctx, kq, g.mask, 1.0f, 0.0f);
    ggml_tensor* V = kv.v_heads(ctx, il, n_kv, n_head, seq0, n_seq);
    ggml_tensor* kqv = ggml_mul_mat(ctx, V, kq);  // [head_dim, n_tokens, n_head, n_seq]
    cur = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_state, n_rows);
    cur = ggml_add(ctx, runtime::mul_mat(ctx, layer.attn_out_w, cur), layer.attn_out_b);
    ggml_tensor* inp_cross = ggml_add(ctx, cur, inp);

    // Cross-attention over the encoder output.
    cur = layer_norm(ctx, inp_cross, layer.cross_ln_w, layer.cross_ln_b);
    q = ggml_add(ctx, runtime::mul_mat(ctx, layer.cross_q_w, cur), layer.cross_q_b);
    Q = ggml_permute(ctx, ggml_reshape_4d(ctx, q, head_dim, n_head, n_tokens, n_seq), 0, 2, 1, 3);
    const size_t layer_cross_offset = static_cast<size_t>(il) * n_audio * n_state * es_cross;
    ggml_tensor* Kc = ggml_view_3d(ctx, state.cross_k, head_dim, n_audio, n_head, n_state * es_cross,
                                   head_dim * es_cross, layer_cross_offset);
    kq = ggml_mul_mat(ctx, Kc, Q);  // [n_audio, n_tokens, n_head, n_seq]
    kq = ggml_soft_max_ext(ctx, kq, nullptr, kq_scale, 0.0f);
    if (spec.want_attention &&
        std::any_of(heads.begin(), heads.end(), [il](const AlignmentHead& h) { return h.layer == il; })) {
      // Kept as an output and read by the session: no nodes added to the step
      // (each costs a thread barrier on the CPU, a kernel launch on a GPU).
      ggml_set_output(kq);
      g.cross_attention[il] = kq;
    }
    ggml_tensor* Vc = ggml_view_3d(ctx, state.cross_v, n_audio, head_dim, n_head, n_audio * es_cross,
                                   static_cast<size_t>(n_audio) * head_dim * es_cross, layer_cross_offset);
    kqv = ggml_mul_mat(ctx, Vc, kq);
    cur = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_state, n_rows);
    cur = ggml_add(ctx, runtime::mul_mat(ctx, layer.cross_out_w, cur), layer.cross_out_b);
    ggml_tensor* inp_ff = ggml_add(ctx, cur, inp_cross);

    inp = residual_mlp(ctx, layer, inp_ff);
  }

  cur = layer_norm(ctx, inp, w.dec_ln_w, w.dec_ln_b);
  if (some_positions) cur = ggml_get_rows(ctx, cur, indices_view(logit_rows_at, int64_t(n_positions) * n_seq));
  ggml_tensor* vocabulary = vocabulary_rows(ctx, w.token_emb, spec.n_vocab_logits);
  g.logits = ggml_mul_mat(ctx, vocabulary, cur);
  ggml_set_output(g.logits);
  ggml_build_forward_expand(graph, g.logits);

  return g;
}

}  // namespace earshot::whisper::detail

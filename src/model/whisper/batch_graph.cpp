// Whisper's decoder step: token + positional embedding, causal self-attention
// over each sequence's KV cache, cross-attention over the precomputed encoder
// K/V, GELU MLP, final LN and logits against the token embedding; the softmaxed
// cross-attention of the layers with alignment heads kept for the session to
// copy those heads out. One graph for the steps of one or several sessions (a
// session's lone step is this graph with one part): everything that reads a
// weight matrix (projections, MLP, logits) is one product over the rows of every
// part, so the weights are read once per step; attention is per part, against
// that part's own self-attention cache and cross K/V, so a part's values are
// computed exactly as its lone step computes them wherever a matrix product gives
// each column the same value whatever the number of columns (ggml's x86 CPU
// kernels without llamafile; batch_decoder.h says what differs with it).
#include <algorithm>
#include <cmath>
#include <map>

#include "model/runtime/amx.h"
#include "model/runtime/cache_attention.h"
#include "model/runtime/device.h"
#include "model/whisper/graph.h"
#include "model/whisper/graph_ops.h"

namespace earshot::whisper::detail {

void append_causal_mask(std::vector<float>& out, int n_past, int n_tokens) {
  const int n_kv = n_past + n_tokens;
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(n_kv) * n_tokens, 0.0f);
  for (int i = 0; i < n_tokens; ++i) {
    for (int j = n_past + i + 1; j < n_kv; ++j) out[at + static_cast<size_t>(i) * n_kv + j] = -INFINITY;
  }
}

DecodeResult read_step_outputs(ggml_backend_t backend, const Model& model, const DecoderGraphSpec& spec,
                               ggml_tensor* logits, size_t logits_offset,
                               const std::vector<ggml_tensor*>& cross_attention) {
  const int n_tokens = spec.n_tokens;
  const int n_positions = static_cast<int>(spec.logits_positions.size());
  const int n_seq = spec.n_sequences;
  DecodeResult result;
  result.n_sequences = n_seq;
  result.n_tokens = n_tokens;
  result.n_positions = n_positions;
  result.n_vocab = spec.n_vocab_logits;
  result.n_frames = spec.n_audio_ctx;
  // Every read is queued on the backend and waited for once: on a GPU, one
  // device-to-host synchronisation per step.
  result.logits.resize(static_cast<size_t>(n_seq) * n_positions * result.n_vocab);
  ggml_backend_tensor_get_async(backend, logits, result.logits.data(), logits_offset,
                                result.logits.size() * sizeof(float));
  if (spec.want_attention) {
    // Each (sequence, head) of a layer's softmax output [n_frames, n_tokens, n_head,
    // n_seq] is one contiguous block, copied to its place in the model's head order.
    const auto& heads = model.alignment_heads();
    const size_t block = static_cast<size_t>(spec.n_audio_ctx) * n_tokens;
    result.n_heads = static_cast<int>(heads.size());
    result.attention.resize(block * heads.size() * n_seq);
    for (int s = 0; s < n_seq; ++s) {
      for (size_t i = 0; i < heads.size(); ++i) {
        const size_t from = (static_cast<size_t>(s) * model.hparams().n_text_head + heads[i].head) * block;
        ggml_backend_tensor_get_async(backend, cross_attention[heads[i].layer],
                                      result.attention.data() + (s * heads.size() + i) * block, from * sizeof(float),
                                      block * sizeof(float));
      }
    }
  }
  ggml_backend_synchronize(backend);
  return result;
}

int batched_graph_size(const Model& model, int n_parts) {
  // Per layer about 30 shared nodes and 35 per part (views included), plus the
  // embedding and one vocabulary product per part at most: a generous bound.
  const int n_layer = static_cast<int>(model.weights().decoder.size());
  return 512 + n_layer * (64 + 64 * n_parts) + 16 * n_parts;
}

namespace {

// Rows [row0, row0 + n_tokens * n_seq) of a [width, rows] tensor as [width, n_tokens, n_seq].
ggml_tensor* part_rows_3d(ggml_context* ctx, ggml_tensor* x, int64_t row0, int n_tokens, int n_seq) {
  return ggml_view_3d(ctx, x, x->ne[0], n_tokens, n_seq, x->nb[1], x->nb[1] * n_tokens, x->nb[1] * row0);
}

// The same rows split into heads, as attention reads them: [head_dim, n_tokens, n_head, n_seq].
ggml_tensor* part_heads(ggml_context* ctx, ggml_tensor* x, int64_t row0, int head_dim, int n_head, int n_tokens,
                        int n_seq) {
  const size_t es = ggml_element_size(x);
  ggml_tensor* v = ggml_view_4d(ctx, x, head_dim, n_head, n_tokens, n_seq, head_dim * es, x->nb[1], x->nb[1] * n_tokens,
                                x->nb[1] * row0);
  return ggml_permute(ctx, v, 0, 2, 1, 3);
}

// Rows of the parts' attention outputs, one after another.
ggml_tensor* join_rows(ggml_context* ctx, const std::vector<ggml_tensor*>& pieces) {
  ggml_tensor* out = pieces[0];
  for (size_t i = 1; i < pieces.size(); ++i) out = ggml_concat(ctx, out, pieces[i], 1);
  return out;
}

}  // namespace

BatchedDecoderGraph build_batched_decoder(ggml_context* ctx, ggml_cgraph* graph, const Model& model,
                                          const std::vector<BatchPart>& parts, runtime::CpuKernels kernels) {
  const Hparams& hp = model.hparams();
  const Weights& w = model.weights();
  const int n_state = hp.n_text_state;
  const int n_head = hp.n_text_head;
  const int head_dim = n_state / n_head;
  const int n_parts = static_cast<int>(parts.size());
  const auto& heads = model.alignment_heads();

  BatchedDecoderGraph g;
  g.parts.resize(n_parts);
  std::vector<int64_t> row0(n_parts);
  int64_t n_rows = 0;
  for (int p = 0; p < n_parts; ++p) {
    row0[p] = n_rows;
    n_rows += static_cast<int64_t>(parts[p].spec->n_tokens) * parts[p].spec->n_sequences;
  }

  // The weight products: ggml's as libwhisper's, or (kAuto, kOpenBlas) the few-row
  // op on a step's rows and OpenBLAS on a long prompt's (runtime::step_products).
  const runtime::MatMul mm = runtime::step_products(kernels, runtime::is_cpu(model.device()), n_rows, 32);

  // Integer inputs: every part's token ids, then positions, then the rows whose
  // logits are wanted, grouped by vocabulary size (a part's rows stay together).
  std::vector<int32_t>& values = g.index_values;
  // (A spec without tokens only sizes the graph: its ids are zeros.)
  for (const BatchPart& part : parts) {
    const std::vector<int32_t>& tokens = part.spec->tokens;
    if (tokens.empty()) {
      values.insert(values.end(), static_cast<size_t>(part.spec->n_tokens) * part.spec->n_sequences, 0);
    } else {
      values.insert(values.end(), tokens.begin(), tokens.end());
    }
  }
  const size_t positions_at = values.size();
  for (const BatchPart& part : parts) {
    for (int s = 0; s < part.spec->n_sequences; ++s) {
      for (int i = 0; i < part.spec->n_tokens; ++i) values.push_back(part.spec->n_past + i);
    }
  }
  struct Group {
    size_t rows_at = 0;
    int64_t n = 0;
    std::vector<int> parts;
  };
  std::map<int, Group> groups;  // by n_vocab_logits
  for (int p = 0; p < n_parts; ++p) groups[parts[p].spec->n_vocab_logits].parts.push_back(p);
  for (auto& [n_vocab, group] : groups) {
    group.rows_at = values.size();
    for (int p : group.parts) {
      const DecoderGraphSpec& spec = *parts[p].spec;
      g.parts[p].logits_offset = static_cast<size_t>(group.n) * n_vocab * sizeof(float);
      for (int s = 0; s < spec.n_sequences; ++s) {
        for (int pos : spec.logits_positions) values.push_back(static_cast<int32_t>(row0[p] + s * spec.n_tokens + pos));
      }
      group.n += static_cast<int64_t>(spec.n_sequences) * spec.logits_positions.size();
    }
  }
  g.indices = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, static_cast<int64_t>(values.size()));
  ggml_set_input(g.indices);
  auto indices_view = [&](size_t at, int64_t n) { return ggml_view_1d(ctx, g.indices, n, at * sizeof(int32_t)); };

  // Every multi-token part's causal mask in one input, viewed per part.
  std::vector<ggml_tensor*> masks(n_parts, nullptr);
  std::vector<size_t> mask_at(n_parts, 0);
  for (int p = 0; p < n_parts; ++p) {
    if (parts[p].spec->n_tokens == 1) continue;
    mask_at[p] = g.mask_values.size();
    append_causal_mask(g.mask_values, parts[p].spec->n_past, parts[p].spec->n_tokens);
  }
  if (!g.mask_values.empty()) {
    g.masks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, static_cast<int64_t>(g.mask_values.size()));
    ggml_set_input(g.masks);
    for (int p = 0; p < n_parts; ++p) {
      const DecoderGraphSpec& spec = *parts[p].spec;
      if (spec.n_tokens == 1) continue;
      const int n_kv = spec.n_past + spec.n_tokens;
      masks[p] = ggml_view_2d(ctx, g.masks, n_kv, spec.n_tokens, n_kv * sizeof(float), mask_at[p] * sizeof(float));
    }
  }

  const float kq_scale = std::pow(static_cast<float>(head_dim), -0.25f);
  ggml_tensor* cur = ggml_add(ctx, ggml_get_rows(ctx, w.token_emb, indices_view(0, n_rows)),
                              ggml_get_rows(ctx, w.dec_pos, indices_view(positions_at, n_rows)));
  ggml_tensor* inp = cur;
  for (auto& part : g.parts) part.cross_attention.assign(w.decoder.size(), nullptr);

  std::vector<ggml_tensor*> pieces(n_parts);
  for (int il = 0; il < static_cast<int>(w.decoder.size()); ++il) {
    const DecoderLayer& layer = w.decoder[il];
    const bool has_heads =
        std::any_of(heads.begin(), heads.end(), [il](const AlignmentHead& h) { return h.layer == il; });

    // Self-attention: projections over every row, attention per part.
    cur = layer_norm(ctx, inp, layer.attn_ln_w, layer.attn_ln_b);
    ggml_tensor* q = ggml_scale(ctx, mm.affine(ctx, layer.attn_q_w, cur, layer.attn_q_b), kq_scale);
    ggml_tensor* k = ggml_scale(ctx, mm(ctx, layer.attn_k_w, cur), kq_scale);
    ggml_tensor* v = mm.affine(ctx, layer.attn_v_w, cur, layer.attn_v_b);
    for (int p = 0; p < n_parts; ++p) {
      const DecoderGraphSpec& spec = *parts[p].spec;
      const runtime::KvCache& kv = *parts[p].state->self_kv;
      const int n_tokens = spec.n_tokens, n_seq = spec.n_sequences, seq0 = spec.first_sequence;
      const int n_kv = spec.n_past + n_tokens;
      ggml_tensor* k_dst = kv.k_slot(ctx, il, spec.n_past, n_tokens, seq0, n_seq);
      ggml_tensor* v_dst = kv.v_slot(ctx, il, spec.n_past, n_tokens, seq0, n_seq);
      ggml_tensor* v_t = ggml_permute(ctx, part_rows_3d(ctx, v, row0[p], n_tokens, n_seq), 1, 0, 2, 3);
      ggml_build_forward_expand(graph, ggml_cpy(ctx, part_rows_3d(ctx, k, row0[p], n_tokens, n_seq), k_dst));
      ggml_build_forward_expand(graph, ggml_cpy(ctx, v_t, v_dst));
      ggml_tensor* Q = part_heads(ctx, q, row0[p], head_dim, n_head, n_tokens, n_seq);
      ggml_tensor* kq = ggml_mul_mat(ctx, kv.k_heads(ctx, il, n_kv, n_head, seq0, n_seq), Q);
      kq = ggml_soft_max_ext(ctx, kq, masks[p], 1.0f, 0.0f);
      ggml_tensor* kqv = ggml_mul_mat(ctx, kv.v_heads(ctx, il, n_kv, n_head, seq0, n_seq), kq);
      pieces[p] = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_state, int64_t(n_tokens) * n_seq);
    }
    cur = mm.affine(ctx, layer.attn_out_w, join_rows(ctx, pieces), layer.attn_out_b);
    ggml_tensor* inp_cross = ggml_add(ctx, cur, inp);

    // Cross-attention, each part over its own encoder output.
    cur = layer_norm(ctx, inp_cross, layer.cross_ln_w, layer.cross_ln_b);
    q = mm.affine(ctx, layer.cross_q_w, cur, layer.cross_q_b);
    for (int p = 0; p < n_parts; ++p) {
      const DecoderGraphSpec& spec = *parts[p].spec;
      const StateTensors& state = *parts[p].state;
      const int n_tokens = spec.n_tokens, n_seq = spec.n_sequences, n_audio = spec.n_audio_ctx;
      const size_t es = ggml_element_size(state.cross_k);
      const size_t layer_offset = static_cast<size_t>(il) * n_audio * n_state * es;
      ggml_tensor* Q = part_heads(ctx, q, row0[p], head_dim, n_head, n_tokens, n_seq);
      ggml_tensor* Kc =
          ggml_view_3d(ctx, state.cross_k, head_dim, n_audio, n_head, n_state * es, head_dim * es, layer_offset);
      // A step's few rows on the cache ops (runtime/cache_attention.h) where the
      // weights' products are on the few-row op; ggml's products otherwise.
      ggml_tensor* scores =
          mm.rows && runtime::key_scores_supports(Kc, Q) ? runtime::key_scores(ctx, Kc, Q) : ggml_mul_mat(ctx, Kc, Q);
      ggml_tensor* kq = ggml_soft_max_ext(ctx, scores, nullptr, kq_scale, 0.0f);
      if (spec.want_attention && has_heads) {
        ggml_set_output(kq);
        g.parts[p].cross_attention[il] = kq;
      }
      ggml_tensor* Vc = ggml_view_3d(ctx, state.cross_v, n_audio, head_dim, n_head, n_audio * es,
                                     static_cast<size_t>(n_audio) * head_dim * es, layer_offset);
      if (mm.rows && runtime::head_values_supports(Vc, kq)) {
        pieces[p] = runtime::head_values(ctx, Vc, kq);
      } else {
        ggml_tensor* kqv = ggml_mul_mat(ctx, Vc, kq);
        pieces[p] = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_state, int64_t(n_tokens) * n_seq);
      }
    }
    cur = mm.affine(ctx, layer.cross_out_w, join_rows(ctx, pieces), layer.cross_out_b);
    ggml_tensor* inp_ff = ggml_add(ctx, cur, inp_cross);

    inp = residual_mlp(ctx, layer, inp_ff, mm);
  }

  // Logits: the wanted rows of every part with the same vocabulary size, one product.
  cur = layer_norm(ctx, inp, w.dec_ln_w, w.dec_ln_b);
  for (const auto& [n_vocab, group] : groups) {
    ggml_tensor* rows = ggml_get_rows(ctx, cur, indices_view(group.rows_at, group.n));
    ggml_tensor* logits = mm(ctx, vocabulary_rows(ctx, w.token_emb, n_vocab), rows);
    ggml_set_output(logits);
    ggml_build_forward_expand(graph, logits);
    for (int p : group.parts) g.parts[p].logits = logits;
  }
  return g;
}

}  // namespace earshot::whisper::detail

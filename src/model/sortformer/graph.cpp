#include "model/sortformer/graph.h"

#include <ggml.h>

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/fastconformer/conformer_blocks.h"
#include "model/fastconformer/encoder.h"
#include "model/runtime/device.h"
#include "model/runtime/graph_ops.h"

namespace earshot::sortformer::detail {
namespace {

constexpr int kMaxNodes = 32768;

// NeMo's ConvSubsampling (pre_encode) without the xscaling that RelPositionalEncoding
// applies later: mel [n_mels, frames] -> [d_enc, T]. The speaker cache and FIFO hold these.
ggml_tensor* pre_encode(ggml_context* ctx, const Model& m, ggml_tensor* mel, runtime::MatMul mm) {
  const fastconformer::Model& e = m.encoder();
  return mm.affine(ctx, e.pre_out_w, fastconformer::build_subsampling_convs(ctx, e, mel, false), e.pre_out_b);
}

// NeMo's MultiHeadAttention (transformer_modules.py): softmax(q k^T / sqrt(dh)) v per
// head (NeMo divides q and k by dh^(1/4) each), no mask (every frame is valid).
ggml_tensor* self_attention(ggml_context* ctx, const Hparams& hp, const TransformerLayer& l, ggml_tensor* x,
                            runtime::MatMul mm) {
  const int H = hp.tf_n_head, dh = hp.tf_d_model / H;
  ggml_tensor* q = mm.affine(ctx, l.q_w, x, l.q_b);
  ggml_tensor* k = mm.affine(ctx, l.k_w, x, l.k_b);
  ggml_tensor* v = mm.affine(ctx, l.v_w, x, l.v_b);
  ggml_tensor* heads =
      runtime::full_attention(ctx, q, k, v, H, 1.0f / std::sqrt(static_cast<float>(dh)), {mm.openblas, false});
  return mm.affine(ctx, l.out_w, heads, l.out_b);
}

// x [d_enc, T] pre-encode embeddings -> [n_speakers, T] probabilities: xscaling,
// the conformer layers (full attention), encoder_proj, the post-LN Transformer
// (TransformerEncoderBlock.forward_postln), then relu -> first_hidden_to_hidden ->
// relu -> single_hidden_to_spks -> sigmoid (SortformerModules.forward_speaker_sigmoids).
ggml_tensor* diarize(ggml_context* ctx, const Model& m, ggml_tensor* x, ggml_tensor* pos_emb, runtime::MatMul mm) {
  const Hparams& hp = m.hparams();
  const fastconformer::Model& e = m.encoder();
  if (hp.encoder.xscaling) x = ggml_scale(ctx, x, std::sqrt(static_cast<float>(hp.encoder.n_state)));
  for (const fastconformer::Layer& l : e.layers)
    x = fastconformer::build_layer(ctx, e, l, x, pos_emb, nullptr, 1e-5f, mm);
  if (m.proj_w) x = mm.affine(ctx, m.proj_w, x, m.proj_b);
  for (const TransformerLayer& l : m.layers) {
    x = runtime::layer_norm(ctx, ggml_add(ctx, x, self_attention(ctx, hp, l, x, mm)), l.ln1_w, l.ln1_b, hp.tf_eps);
    ggml_tensor* h = mm.affine(ctx, l.ff_out_w, ggml_relu(ctx, mm.affine(ctx, l.ff_in_w, x, l.ff_in_b)), l.ff_out_b);
    x = runtime::layer_norm(ctx, ggml_add(ctx, x, h), l.ln2_w, l.ln2_b, hp.tf_eps);
  }
  x = ggml_relu(ctx, mm.affine(ctx, m.head_hidden_w, ggml_relu(ctx, x), m.head_hidden_b));
  return ggml_sigmoid(ctx, mm.affine(ctx, m.head_out_w, x, m.head_out_b));
}

void set_pos_emb(ggml_tensor* pos_emb, int T, int d) {
  runtime::set_input(pos_emb, fastconformer::relative_positions(T, d));
}

void check_mel(const Hparams& hp, std::span<const float> mel, int n_mel) {
  if (n_mel < 1 || mel.size() != static_cast<size_t>(n_mel) * hp.encoder.n_mels)
    throw Error(ErrorCode::kInvalidArgument,
                "the diarizer takes a non-empty [frames][" + std::to_string(hp.encoder.n_mels) + "] mel; got " +
                    std::to_string(mel.size()) + " values for " + std::to_string(n_mel) + " frames");
}

}  // namespace

features::NemoMelConfig mel_config(const fastconformer::Hparams& e) {
  features::NemoMelConfig c;
  c.n_fft = e.n_fft;
  c.hop_length = e.hop_length;
  c.n_mels = e.n_mels;
  c.preemph = e.preemph;
  c.log_guard = e.log_guard;
  c.normalize_per_feature = false;
  return c;
}

Runner::Runner(const Model& model, const RunOptions& options) : model_(model) {
  if (options.backend) {
    backend_ = options.backend;
  } else {
    owned_ = runtime::create_backend(model.device(), options.threads);
    backend_ = owned_.get();
  }
  products_ = runtime::encoder_products(options.cpu_kernels, runtime::is_cpu(runtime::device_of(backend_)));
  runner_ = std::make_unique<runtime::GraphRunner>(backend_, "diarizer");
}

Runner::~Runner() = default;

FrameProbabilities Runner::offline(std::span<const float> mel, int n_mel) {
  const Hparams& hp = model_.hparams();
  check_mel(hp, mel, n_mel);
  const runtime::GraphRunner::Graph g = runner_->begin(kMaxNodes);
  ggml_context* ctx = g.ctx();
  ggml_cgraph* graph = g.graph();
  const runtime::MatMul mm = products_;
  ggml_tensor* input = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.encoder.n_mels, n_mel);
  ggml_set_input(input);
  ggml_tensor* x = pre_encode(ctx, model_, input, mm);
  const int T = static_cast<int>(x->ne[1]);
  ggml_tensor* pos_emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.encoder.n_state, 2 * T - 1);
  ggml_set_input(pos_emb);
  ggml_tensor* probs = diarize(ctx, model_, x, pos_emb, mm);
  ggml_set_output(probs);
  ggml_build_forward_expand(graph, probs);
  runner_->allocate(g, std::to_string(n_mel) + " mel frames");
  runtime::set_input(input, mel);
  set_pos_emb(pos_emb, T, hp.encoder.n_state);
  runner_->compute(g);
  FrameProbabilities out;
  out.n_frames = T;
  out.n_speakers = hp.n_speakers;
  out.data = runtime::read_output(probs);
  return out;
}

StepOutput Runner::step(std::span<const float> mel, int n_mel, std::span<const float> prefix, int n_prefix) {
  const Hparams& hp = model_.hparams();
  const int d = hp.encoder.n_state;
  check_mel(hp, mel, n_mel);
  if (n_prefix < 0 || prefix.size() != static_cast<size_t>(n_prefix) * d)
    throw Error(ErrorCode::kInternal, "a speaker cache and FIFO of " + std::to_string(prefix.size()) + " values for " +
                                          std::to_string(n_prefix) + " frames");
  const runtime::GraphRunner::Graph g = runner_->begin(kMaxNodes);
  ggml_context* ctx = g.ctx();
  ggml_cgraph* graph = g.graph();
  const runtime::MatMul mm = products_;
  ggml_tensor* input = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.encoder.n_mels, n_mel);
  ggml_set_input(input);
  ggml_tensor* chunk = pre_encode(ctx, model_, input, mm);
  ggml_set_output(chunk);
  ggml_tensor* cached = nullptr;
  ggml_tensor* x = chunk;
  if (n_prefix > 0) {
    cached = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, n_prefix);
    ggml_set_input(cached);
    x = ggml_concat(ctx, cached, chunk, 1);
  }
  const int T = static_cast<int>(x->ne[1]);
  ggml_tensor* pos_emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, 2 * T - 1);
  ggml_set_input(pos_emb);
  ggml_tensor* probs = diarize(ctx, model_, x, pos_emb, mm);
  ggml_set_output(probs);
  ggml_build_forward_expand(graph, chunk);
  ggml_build_forward_expand(graph, probs);
  runner_->allocate(g, "a step of " + std::to_string(T) + " frames");
  runtime::set_input(input, mel);
  if (cached) runtime::set_input(cached, prefix);
  set_pos_emb(pos_emb, T, d);
  runner_->compute(g);
  StepOutput out;
  out.n_chunk = static_cast<int>(chunk->ne[1]);
  out.chunk_emb = runtime::read_output(chunk);
  out.n_preds = T;
  out.preds = runtime::read_output(probs);
  return out;
}

}  // namespace earshot::sortformer::detail

#include "model/fastconformer/streaming_encoder.h"

#include <ggml.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/fastconformer/encoder_graph.h"

namespace earshot::fastconformer {
namespace {

constexpr int kMaxNodes = 16384;
// Each causal stride-2 stage's first two outputs read its left padding: a
// window that starts 16 mel frames before a chunk (a multiple of 8) gives that
// chunk's frames exactly from its third output on.
constexpr int kSubsamplingOverlap = 2;
// At most this many encoder frames (whole chunks) per pass, to bound the graph's memory.
constexpr int kMaxBatchFrames = 64;

}  // namespace

StreamingEncoder::StreamingEncoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options)
    : model_(std::move(model)), backend_(backend), options_(options) {
  const Hparams& hp = model_->hparams();
  right_ = resolve_right_context(hp, options_.right_context);
  check_streaming(hp, right_, "the model");
  cache_frames_ = (hp.att_left / (right_ + 1)) * (right_ + 1);
  alloc_ = std::make_unique<runtime::GraphAllocator>(ggml_backend_get_default_buffer_type(backend_));
  meta_.resize(ggml_tensor_overhead() * kMaxNodes + ggml_graph_overhead_custom(kMaxNodes, false));
  reset();
}

StreamingEncoder::~StreamingEncoder() = default;

void StreamingEncoder::reset() {
  const Hparams& hp = model_->hparams();
  mel_.clear();
  mel_base_ = n_mel_ = frames_done_ = 0;
  att_cache_.assign(hp.n_layer, {});
  att_cache_frames_.assign(hp.n_layer, 0);
  // The causal conv's left padding is zeros: so is the cache before the first chunk.
  conv_cache_.assign(hp.n_layer, std::vector<float>(static_cast<size_t>(hp.n_conv_kernel - 1) * hp.n_state, 0.0f));
}

EncoderOutput StreamingEncoder::push(std::span<const float> mel, int n_mel_frames) {
  const Hparams& hp = model_->hparams();
  if (n_mel_frames < 0 || mel.size() != static_cast<size_t>(n_mel_frames) * hp.n_mels)
    throw Error(ErrorCode::kInvalidArgument, "the streaming encoder takes [frames][" + std::to_string(hp.n_mels) +
                                                 "] mel; got " + std::to_string(mel.size()) + " values for " +
                                                 std::to_string(n_mel_frames) + " frames");
  mel_.insert(mel_.end(), mel.begin(), mel.end());
  n_mel_ += n_mel_frames;
  EncoderOutput out;
  out.first_frame = frames_done_;
  out.n_state = hp.n_state;
  // Encoder frame t reads mel frames up to 8t: a chunk is ready once its last
  // frame's are here. Chunks ready together are encoded in one pass (the weights
  // read once), masked as offline.
  const int chunk = right_ + 1;
  const int ready = n_mel_ > 0 ? ((n_mel_ - 1) / 8 + 1 - frames_done_) / chunk : 0;
  for (int done = 0; done < ready;) {
    const int n = std::min(ready - done, std::max(1, kMaxBatchFrames / chunk));
    encode_chunk(frames_done_, frames_done_ + n * chunk - 1, false, out);
    done += n;
  }
  return out;
}

EncoderOutput StreamingEncoder::finish() {
  const Hparams& hp = model_->hparams();
  EncoderOutput out;
  out.first_frame = frames_done_;
  out.n_state = hp.n_state;
  const int total = n_mel_ > 0 ? hp.encoder_frames(n_mel_) : 0;
  const int max_frames = std::max(1, kMaxBatchFrames / (right_ + 1)) * (right_ + 1);
  while (frames_done_ < total) {
    const int t0 = frames_done_, t1 = std::min(t0 + max_frames - 1, total - 1);
    encode_chunk(t0, t1, 8 * t1 > n_mel_ - 1, out);
  }
  reset();
  return out;
}

void StreamingEncoder::encode_chunk(int t0, int t1, bool at_end, EncoderOutput& out) {
  const Hparams& hp = model_->hparams();
  const Model& m = *model_;
  const int d = hp.n_state, K = hp.n_conv_kernel;
  // The mel window: from 16 frames before the chunk (or the start) to the chunk's
  // last frame's 8t, or to the end of the stream, where the right padding falls
  // where it falls offline (the window starts on a multiple of 8).
  const int a = std::max(0, 8 * (t0 - kSubsamplingOverlap));
  const int b = at_end ? n_mel_ - 1 : 8 * t1;
  const int drop = t0 - a / 8, n_q = t1 - t0 + 1, n_win = b - a + 1;

  ggml_init_params params{meta_.size(), meta_.data(), true};
  ggml_context_ptr guard{ggml_init(params)};
  ggml_context* ctx = guard.get();
  if (!ctx) throw Error(ErrorCode::kInternal, "ggml_init failed for the streaming encoder graph");
  ggml_cgraph* graph = ggml_new_graph_custom(ctx, kMaxNodes, false);
  ggml_tensor* input = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, hp.n_mels, n_win, 1, 1);
  ggml_set_input(input);
  ggml_tensor* x = detail::build_subsampling(ctx, m, input, options_.f16_subsampling);
  if (x->ne[1] != drop + n_q)
    throw Error(ErrorCode::kInternal, "the streaming subsampling gave " + std::to_string(x->ne[1]) +
                                          " frames for a window of " + std::to_string(n_win) + ", expected " +
                                          std::to_string(drop + n_q));
  x = ggml_view_2d(ctx, x, d, n_q, x->nb[1], drop * x->nb[1]);
  // Every layer sees the same number of cached frames (they were filled together).
  const int n_cached = att_cache_frames_[0], n_k = n_cached + n_q;
  ggml_tensor* pos_emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, n_k + n_q - 1);
  ggml_set_input(pos_emb);
  // Several chunks in one pass: each query sees its own chunk and the
  // left / (right + 1) chunks before it, the offline chunked_limited mask.
  const int chunk = right_ + 1, left_chunks = hp.att_left / chunk;
  ggml_tensor* mask = nullptr;
  std::vector<float> mask_values;
  if (n_q > chunk) {
    mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_k, n_q);
    ggml_set_input(mask);
    mask_values.assign(static_cast<size_t>(n_k) * n_q, 0.0f);
    for (int i = 0; i < n_q; ++i) {
      for (int j = 0; j < n_k; ++j) {
        const int diff = (t0 + i) / chunk - (t0 - n_cached + j) / chunk;
        if (diff < 0 || diff > left_chunks) mask_values[static_cast<size_t>(i) * n_k + j] = -INFINITY;
      }
    }
  }
  std::vector<detail::LayerCaches> caches(hp.n_layer);
  for (int i = 0; i < hp.n_layer; ++i) {
    detail::LayerCaches& c = caches[i];
    if (n_cached > 0) {
      c.att_in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, d, n_cached);
      ggml_set_input(c.att_in);
    }
    c.conv_in = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K - 1, d);
    ggml_set_input(c.conv_in);
    c.att_keep = cache_frames_;
    x = detail::build_layer(ctx, m, m.layers[i], x, pos_emb, mask, options_.batch_norm_eps, &c);
    if (c.att_next) {
      ggml_set_output(c.att_next);
      ggml_build_forward_expand(graph, c.att_next);
    }
    ggml_set_output(c.conv_next);
    ggml_build_forward_expand(graph, c.conv_next);
  }
  ggml_set_output(x);
  ggml_build_forward_expand(graph, x);
  if (!alloc_->alloc(graph)) throw Error(ErrorCode::kInternal, "cannot allocate the streaming encoder graph");
  ggml_backend_tensor_set(input, mel_.data() + static_cast<size_t>(a - mel_base_) * hp.n_mels, 0,
                          static_cast<size_t>(n_win) * hp.n_mels * sizeof(float));
  const std::vector<float> pe = relative_positions(n_k - 1, n_k + n_q - 1, d);
  ggml_backend_tensor_set(pos_emb, pe.data(), 0, pe.size() * sizeof(float));
  if (mask) ggml_backend_tensor_set(mask, mask_values.data(), 0, mask_values.size() * sizeof(float));
  for (int i = 0; i < hp.n_layer; ++i) {
    if (caches[i].att_in)
      ggml_backend_tensor_set(caches[i].att_in, att_cache_[i].data(), 0, att_cache_[i].size() * sizeof(float));
    ggml_backend_tensor_set(caches[i].conv_in, conv_cache_[i].data(), 0, conv_cache_[i].size() * sizeof(float));
  }
  if (ggml_backend_graph_compute(backend_, graph) != GGML_STATUS_SUCCESS)
    throw Error(ErrorCode::kInternal, "the streaming encoder graph failed to compute");
  for (int i = 0; i < hp.n_layer; ++i) {
    const detail::LayerCaches& c = caches[i];
    att_cache_frames_[i] = c.att_next ? static_cast<int>(c.att_next->ne[1]) : 0;
    att_cache_[i].resize(static_cast<size_t>(att_cache_frames_[i]) * d);
    if (c.att_next) ggml_backend_tensor_get(c.att_next, att_cache_[i].data(), 0, att_cache_[i].size() * sizeof(float));
    ggml_backend_tensor_get(c.conv_next, conv_cache_[i].data(), 0, conv_cache_[i].size() * sizeof(float));
  }
  const size_t old = out.data.size();
  out.data.resize(old + static_cast<size_t>(n_q) * d);
  ggml_backend_tensor_get(x, out.data.data() + old, 0, static_cast<size_t>(n_q) * d * sizeof(float));
  out.n_frames += n_q;
  frames_done_ = t1 + 1;
  // The next chunk's window starts at 8 (t1 + 1 - 2): older mel is not read again.
  const int keep_from = std::max(0, 8 * (frames_done_ - kSubsamplingOverlap));
  if (keep_from > mel_base_) {
    mel_.erase(mel_.begin(), mel_.begin() + static_cast<std::ptrdiff_t>(keep_from - mel_base_) * hp.n_mels);
    mel_base_ = keep_from;
  }
}

}  // namespace earshot::fastconformer

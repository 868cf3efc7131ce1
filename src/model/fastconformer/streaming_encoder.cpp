#include "model/fastconformer/streaming_encoder.h"

#include <algorithm>

#include "common/error.h"
#include "model/fastconformer/streaming_batch.h"

namespace earshot::fastconformer {
StreamingEncoder::StreamingEncoder(std::shared_ptr<const Model> model, ggml_backend_t backend, EncoderOptions options,
                                   std::shared_ptr<StreamingBatcher> batcher)
    : model_(std::move(model)), options_(options), batcher_(std::move(batcher)) {
  const Hparams& hp = model_->hparams();
  state_.right = resolve_right_context(hp, options_.right_context);
  check_streaming(hp, state_.right, "the model");
  state_.cache_frames = (hp.att_left / (state_.right + 1)) * (state_.right + 1);
  state_.f16_subsampling = options_.f16_subsampling;
  if (batcher_ && &batcher_->model() != model_.get())
    throw Error(ErrorCode::kInvalidArgument, "a streaming encoder's batcher must be on the same model");
  if (!batcher_) graph_ = std::make_unique<detail::StepGraph>(backend, options_.cpu_kernels);
  reset();
}

StreamingEncoder::~StreamingEncoder() = default;

void StreamingEncoder::reset() {
  const Hparams& hp = model_->hparams();
  detail::StreamState& s = state_;
  s.mel.clear();
  s.mel_base = s.n_mel = s.frames_done = s.att_frames = 0;
  s.keys.assign(hp.n_layer, {});
  s.values.assign(hp.n_layer, {});
  // The causal conv's left padding is zeros: so is the cache before the first chunk.
  s.conv_cache.assign(hp.n_layer, std::vector<float>(static_cast<size_t>(hp.n_conv_kernel - 1) * hp.n_state, 0.0f));
}

void StreamingEncoder::append_mel(std::span<const float> mel, int n_mel_frames) {
  const Hparams& hp = model_->hparams();
  if (n_mel_frames < 0 || mel.size() != static_cast<size_t>(n_mel_frames) * hp.n_mels)
    throw Error(ErrorCode::kInvalidArgument, "the streaming encoder takes [frames][" + std::to_string(hp.n_mels) +
                                                 "] mel; got " + std::to_string(mel.size()) + " values for " +
                                                 std::to_string(n_mel_frames) + " frames");
  state_.mel.insert(state_.mel.end(), mel.begin(), mel.end());
  state_.n_mel += n_mel_frames;
}

bool StreamingEncoder::next_step(bool end_of_stream, int& t0, int& t1, bool& at_end) const {
  const detail::StreamState& s = state_;
  const int chunk = s.right + 1, max_chunks = std::max(1, detail::kMaxStepFrames / chunk);
  t0 = s.frames_done;
  if (end_of_stream) {
    const int total = s.n_mel > 0 ? model_->hparams().encoder_frames(s.n_mel) : 0;
    if (t0 >= total) return false;
    t1 = std::min(t0 + max_chunks * chunk - 1, total - 1);
    at_end = 8 * t1 > s.n_mel - 1;
    return true;
  }
  // Encoder frame t reads mel frames up to 8t: a chunk is ready once its last
  // frame's are here. Chunks ready together are encoded in one pass (the weights
  // read once), masked as offline.
  const int ready = s.n_mel > 0 ? ((s.n_mel - 1) / 8 + 1 - s.frames_done) / chunk : 0;
  if (ready < 1) return false;
  t1 = t0 + std::min(ready, max_chunks) * chunk - 1;
  at_end = false;
  return true;
}

EncoderOutput StreamingEncoder::encode_ready(bool end_of_stream) {
  EncoderOutput out;
  out.first_frame = state_.frames_done;
  out.n_state = model_->hparams().n_state;
  int t0 = 0, t1 = 0;
  bool at_end = false;
  while (next_step(end_of_stream, t0, t1, at_end)) encode_chunk(t0, t1, at_end, out);
  return out;
}

EncoderOutput StreamingEncoder::push(std::span<const float> mel, int n_mel_frames) {
  append_mel(mel, n_mel_frames);
  return encode_ready(false);
}

EncoderOutput StreamingEncoder::finish() {
  EncoderOutput out = encode_ready(true);
  reset();
  return out;
}

void StreamingEncoder::encode_chunk(int t0, int t1, bool at_end, EncoderOutput& out) {
  if (batcher_) {
    batcher_->encode(*this, t0, t1, at_end, out);
    return;
  }
  const detail::StreamStep step{&state_, t0, t1, at_end, &out};
  graph_->run(*model_, options_.batch_norm_eps, std::span<const detail::StreamStep>(&step, 1));
}

}  // namespace earshot::fastconformer

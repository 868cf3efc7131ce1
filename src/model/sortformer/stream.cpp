// The chunking is NeMo's streaming_feat_loader over the stream's mel frames:
// chunk i covers mel frames [s, e) with s = i x chunk x 8, e = min(s + chunk x 8,
// F), plus min(left x 8, s) frames before and min(right x 8, F - e) after; its
// pre-encoded frames are lc = that left / 8 and rc = ceil(that right / 8) beside
// the chunk's own. A chunk runs once its right context has arrived, so pushing
// in pieces gives what one pass over the whole stream gives.
#include "model/sortformer/stream.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "features/nemo_mel_stream.h"
#include "model/sortformer/graph.h"

namespace earshot::sortformer {

struct Stream::Impl {
  detail::Runner runner;
  std::unique_ptr<features::NemoMelStream> mel;
  Impl(const Model& model, const RunOptions& run) : runner(model, run) {}
};

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "diarization stream: " + what);
}

void require_option(bool ok, const char* field, const std::string& what) {
  if (!ok) throw OptionError(field, "diarization stream: " + what);
}

}  // namespace

Stream::Stream(const Model& model, StreamOptions options) : model_(model), options_(options) {
  const Hparams& hp = model.hparams();
  const int S = hp.n_speakers, sil = hp.cache.sil_frames_per_spk;
  require_option(options.max_speakers >= 1 && options.max_speakers <= S, "max_speakers",
                 "max_speakers " + std::to_string(options.max_speakers) + " is outside 1.." + std::to_string(S) +
                     " (the model tells at most " + std::to_string(S) + " speakers apart)");
  require_option(options.chunk_frames >= 1, "chunk_frames", "chunk_frames must be at least 1");
  require_option(options.update_period >= 1, "update_period", "update_period must be at least 1");
  require_option(options.left_context >= 0 && options.right_context >= 0, "left_context",
                 "the left and right contexts must be >= 0");
  require_option(options.fifo_len >= 0, "fifo_len", "fifo_len must be >= 0");
  require_option(options.spkcache_len >= (1 + sil) * S, "spkcache_len",
                 "spkcache_len " + std::to_string(options.spkcache_len) + " is below (1 + " + std::to_string(sil) +
                     " silence frames) x " + std::to_string(S) + " speakers");
  config_.n_speakers = S;
  config_.d = hp.encoder.n_state;
  config_.params = hp.cache;
  config_.params.spkcache_len = options.spkcache_len;
  config_.params.fifo_len = options.fifo_len;
  config_.params.chunk_len = options.chunk_frames;
  config_.params.update_period = options.update_period;
  config_.params.chunk_left_context = options.left_context;
  config_.params.chunk_right_context = options.right_context;
  if (options.async_update >= 0) config_.params.async_streaming = options.async_update == 1;
  state_.mean_sil_emb.assign(config_.d, 0.0f);
  impl_ = std::make_unique<Impl>(model, options.run);
}

Stream::~Stream() = default;

void Stream::push(std::span<const float> samples) {
  require(!finished_, "push after finish");
  require(!features_, "a stream takes samples or features, not both");
  samples_ = true;
  if (!impl_->mel)
    impl_->mel = std::make_unique<features::NemoMelStream>(detail::mel_config(model_.hparams().encoder),
                                                           model_.mel_filters(), model_.window());
  const features::FrameMajorMel m = impl_->mel->push(samples);
  mel_.insert(mel_.end(), m.data.begin(), m.data.end());
  n_mel_ += m.n_frames;
  run_ready(false);
}

void Stream::push_features(std::span<const float> mel, int n_frames) {
  require(!finished_, "push after finish");
  require(!samples_, "a stream takes samples or features, not both");
  const int n_mels = model_.hparams().encoder.n_mels;
  require(n_frames >= 0 && mel.size() == static_cast<size_t>(n_frames) * n_mels,
          "features must be [frames][" + std::to_string(n_mels) + "]");
  features_ = true;
  mel_.insert(mel_.end(), mel.begin(), mel.end());
  n_mel_ += n_frames;
  run_ready(false);
}

void Stream::finish() {
  if (finished_) return;
  if (impl_->mel) {
    const features::FrameMajorMel m = impl_->mel->finish();
    mel_.insert(mel_.end(), m.data.begin(), m.data.end());
    n_mel_ += m.n_frames;
  }
  run_ready(true);
  finished_ = true;
}

std::vector<FrameActivity> Stream::take_frames() { return std::exchange(frames_, {}); }

void Stream::run_ready(bool final) {
  const Hparams& hp = model_.hparams();
  const int sub = hp.encoder.subsampling_factor, n_mels = hp.encoder.n_mels, S = hp.n_speakers;
  const long long chunk = static_cast<long long>(options_.chunk_frames) * sub;
  const long long left = static_cast<long long>(options_.left_context) * sub;
  const long long right = static_cast<long long>(options_.right_context) * sub;
  const double seconds = hp.frame_seconds();
  while (true) {
    const long long start = next_start_;
    if (final ? start >= n_mel_ : n_mel_ < start + chunk + right) break;
    const long long end = std::min(start + chunk, n_mel_);
    const long long left_off = std::min(left, start), right_off = std::min(right, n_mel_ - end);
    const long long from = start - left_off, to = end + right_off;
    const std::span<const float> mel(mel_.data() + (from - mel_base_) * n_mels,
                                     static_cast<size_t>(to - from) * n_mels);
    // The step's prefix: speaker cache then FIFO.
    std::vector<float> prefix(state_.cache);
    prefix.insert(prefix.end(), state_.fifo.begin(), state_.fifo.end());
    const int n_prefix = state_.n_cache + state_.n_fifo;
    detail::StepOutput out = impl_->runner.step(mel, static_cast<int>(to - from), prefix, n_prefix);
    const int lc = static_cast<int>(left_off / sub), rc = static_cast<int>((right_off + sub - 1) / sub);
    const std::vector<float> preds = aosc_update(config_, state_, out.chunk_emb, out.n_chunk, out.preds, lc, rc);
    const int n = static_cast<int>(preds.size() / S);
    for (int t = 0; t < n; ++t) {
      FrameActivity f;
      f.start = (next_frame_ + t) * seconds;
      f.end = (next_frame_ + t + 1) * seconds;
      for (int k = 0; k < std::min(S, options_.max_speakers); ++k) f.prob[k] = preds[static_cast<size_t>(t) * S + k];
      frames_.push_back(f);
    }
    if (observer_) observer_({chunks_, next_frame_, n, preds, &state_});
    next_frame_ += n;
    ++chunks_;
    next_start_ = end;
    // Keep the mel the next chunk's left context needs.
    const long long keep_from = std::max(mel_base_, next_start_ - left);
    mel_.erase(mel_.begin(), mel_.begin() + (keep_from - mel_base_) * n_mels);
    mel_base_ = keep_from;
  }
}

}  // namespace earshot::sortformer

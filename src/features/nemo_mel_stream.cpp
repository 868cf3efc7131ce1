#include "features/nemo_mel_stream.h"

#include <algorithm>

#include "common/error.h"

namespace earshot::features {

NemoMelStream::NemoMelStream(const NemoMelConfig& config, std::vector<float> filters, std::vector<float> window)
    : config_(config), filters_(std::move(filters)), window_(std::move(window)) {
  if (config_.normalize_per_feature)
    throw Error(ErrorCode::kUnsupported,
                "streaming features need a model without per-feature normalisation (it spans the whole utterance)");
  reset();
}

void NemoMelStream::reset() {
  padded_.assign(config_.n_fft / 2, 0.0f);  // the centre padding before the first sample
  padded_base_ = 0;
  n_samples_ = 0;
  last_sample_ = 0;
  next_frame_ = 0;
}

FrameMajorMel NemoMelStream::push(std::span<const float> samples) {
  for (float s : samples) {
    // Pre-emphasis across pieces; the stream's first sample passes as it is.
    padded_.push_back(n_samples_ == 0 ? s : s - config_.preemph * last_sample_);
    last_sample_ = s;
    ++n_samples_;
  }
  // Frame f spans padded samples [f * hop, f * hop + n_fft); none past the
  // count the samples so far give (which only grows), so a frame pushed is
  // one the whole stream keeps.
  const long long available = padded_base_ + static_cast<long long>(padded_.size());
  const int end =
      available < config_.n_fft ? 0 : static_cast<int>((available - config_.n_fft) / config_.hop_length) + 1;
  return frames(std::min(end, nemo_frame_count(n_samples_, config_)));
}

FrameMajorMel NemoMelStream::finish() {
  FrameMajorMel out;
  if (n_samples_ > 0) {
    padded_.insert(padded_.end(), config_.n_fft / 2, 0.0f);  // the centre padding after the last sample
    out = frames(nemo_frame_count(n_samples_, config_));
  } else {
    out.n_mel = config_.n_mels;
  }
  reset();
  return out;
}

FrameMajorMel NemoMelStream::frames(int end_frame) {
  FrameMajorMel mel;
  mel.n_mel = config_.n_mels;
  mel.n_frames = std::max(0, end_frame - next_frame_);
  if (mel.n_frames == 0) return mel;
  mel.data.resize(static_cast<size_t>(mel.n_frames) * config_.n_mels);
  const long long first = static_cast<long long>(next_frame_) * config_.hop_length - padded_base_;
  nemo_mel_frames(std::span<const float>(padded_).subspan(static_cast<size_t>(first)), mel.n_frames, config_, filters_,
                  window_, mel.data.data());
  next_frame_ = end_frame;
  // Keep what the next frame reads.
  const long long keep_from = static_cast<long long>(next_frame_) * config_.hop_length - padded_base_;
  padded_.erase(padded_.begin(), padded_.begin() + static_cast<std::ptrdiff_t>(keep_from));
  padded_base_ += keep_from;
  return mel;
}

}  // namespace earshot::features

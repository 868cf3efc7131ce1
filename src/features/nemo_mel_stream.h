// NeMo's log-mel features computed as audio arrives, frame for frame equal to
// nemo_log_mel() over the whole stream (pre-emphasis carried across pieces, the
// centre zero padding at the start, and at the end on finish()). Only for
// models without utterance normalisation (that needs the whole utterance).
#pragma once

#include <span>
#include <vector>

#include "features/nemo_mel.h"

namespace earshot::features {

class NemoMelStream {
 public:
  // Throws Error(kUnsupported) for a config with per-feature normalisation.
  NemoMelStream(const NemoMelConfig& config, std::vector<float> filters, std::vector<float> window);

  // Appends samples; returns the frames now complete ([n][n_mels]; a frame is
  // complete once its whole n_fft span has arrived).
  FrameMajorMel push(std::span<const float> samples);
  // The end of the stream: the remaining frames (nemo_frame_count(n_samples) in all), then a new stream.
  FrameMajorMel finish();
  void reset();

 private:
  FrameMajorMel frames(int end_frame);

  NemoMelConfig config_;
  std::vector<float> filters_, window_;
  std::vector<float> padded_;  // pre-emphasised, centre-padded samples from padded_base_
  long long padded_base_ = 0, n_samples_ = 0;
  float last_sample_ = 0;
  int next_frame_ = 0;
};

}  // namespace earshot::features

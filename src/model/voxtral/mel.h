// Voxtral's log-mel, frame by frame (mistral-common's and transformers'
// VoxtralRealtimeFeatureExtractor): frame f is centred on sample f x hop, a
// periodic Hann window of n_fft samples, |rfft|^2, the Slaney filter bank,
// log10(max(., 1e-10)), then max(., global_max - 8) and (. + 4) / 4 with the
// file's FIXED global maximum (1.5), not the utterance's: a frame depends on its
// own 25 ms of audio only, so a stream computes each frame once. Samples before
// the signal's start and after its end are zeros: the reference's reflection of
// its zero padding (32 slots of silence in front, the right padding behind).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "features/fft.h"
#include "model/voxtral/model.h"

namespace earshot::voxtral {

class LogMel {
 public:
  // filters [n_mels][n_fft/2 + 1], window n_fft (the file's tables).
  LogMel(const Hparams& hp, std::vector<float> filters, std::vector<float> window);

  int n_mels() const { return n_mels_; }
  int n_fft() const { return n_fft_; }
  int hop() const { return hop_; }

  // Frame f's n_mels values into out, from the signal's samples [first, first +
  // samples.size()) (zeros elsewhere); the samples must cover what the frame
  // reads that lies inside the signal.
  void frame(std::span<const float> samples, int64_t first, int64_t f, float* out,
             features::RealFft::Workspace& workspace) const;

 private:
  int n_mels_, n_fft_, hop_;
  float floor_;  // global_max - 8
  std::vector<float> filters_, window_;
  features::RealFft fft_;
};

}  // namespace earshot::voxtral

// NeMo's log-mel features (FastConformer / Parakeet), as whisper.cpp's
// libparakeet computes them: pre-emphasis, centre zero padding of n_fft/2, the
// model's window centred in an n_fft frame, power spectrum, the model's filter
// bank, log(x + guard), then per-feature normalisation (mean and sample
// standard deviation + 1e-5 over the n_samples/hop frames that hold audio,
// applied to every frame) or none, as the model file says.
#pragma once

#include <span>
#include <vector>

namespace earshot::features {

struct NemoMelConfig {
  int n_fft = 512;
  int hop_length = 160;
  int n_mels = 128;
  float preemph = 0.97f;
  float log_guard = 5.960464477539063e-08f;  // 2^-24
  bool normalize_per_feature = true;
};

struct FrameMajorMel {
  int n_mel = 0;
  int n_frames = 0;
  std::vector<float> data;  // [n_frames][n_mel]: frame-major, as the FastConformer subsampling reads it
};

// filters: [n_mels][n_fft/2 + 1]; window: at most n_fft samples.
// The log-mel of n_frames frames hop apart over x, samples already
// pre-emphasised and centre-padded (frame f reads x[f * hop, f * hop + n_fft)).
void nemo_mel_frames(std::span<const float> x, int n_frames, const NemoMelConfig& config,
                     std::span<const float> filters, std::span<const float> window, float* out);

FrameMajorMel nemo_log_mel(std::span<const float> samples, const NemoMelConfig& config, std::span<const float> filters,
                           std::span<const float> window);

}  // namespace earshot::features

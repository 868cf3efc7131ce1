// NeMo's log-mel features (FastConformer / Parakeet, Sortformer), as NeMo's
// AudioToMelSpectrogramPreprocessor computes them at inference (NeMo >= 2.4):
// pre-emphasis, centre zero padding of n_fft/2, the model's window centred in
// an n_fft frame, power spectrum, the model's filter bank, log(x + guard), then
// per-feature normalisation (mean and sample standard deviation + 1e-5 over the
// frames that hold audio) or none, as the model file says.
//
// The frame count is NeMo's sequence length, floor(n_samples / hop): the frames
// whose centre lies on audio (FilterbankFeatures.get_seq_len; its forward masks
// the frame past the end, the encoder never reads it). libparakeet (whisper.cpp's
// Parakeet, the parity tests' oracle) and NeMo before 2.4 keep one frame more,
// the frame centred on the audio's end: NemoFrameCount::kLibparakeet.
#pragma once

#include <span>
#include <vector>

namespace earshot::features {

enum class NemoFrameCount {
  kNemo,         // floor(n / hop): NeMo's get_seq_len (>= 2.4), what its models' encoders read
  kLibparakeet,  // floor(n / hop) + 1: libparakeet's and NeMo < 2.4's, the last frame centred on the end
};

struct NemoMelConfig {
  int n_fft = 512;
  int hop_length = 160;
  int n_mels = 128;
  float preemph = 0.97f;
  float log_guard = 5.960464477539063e-08f;  // 2^-24
  bool normalize_per_feature = true;
  NemoFrameCount frame_count = NemoFrameCount::kNemo;
};

// The frames n_samples give (none for no samples, whatever the count).
int nemo_frame_count(long long n_samples, const NemoMelConfig& config);

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

// nemo_frame_count(samples.size()) frames; the normalisation's statistics are
// over the floor(n / hop) frames that hold audio (libparakeet's extra frame is
// normalised with them, as libparakeet does).
FrameMajorMel nemo_log_mel(std::span<const float> samples, const NemoMelConfig& config, std::span<const float> filters,
                           std::span<const float> window);

}  // namespace earshot::features

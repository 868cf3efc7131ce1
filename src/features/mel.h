// Whisper's log-mel spectrogram, exactly as whisper.cpp computes it: 16 kHz,
// 400-point periodic Hann window, hop 160, 201 power bins, mel filter bank,
// log10(max(x, 1e-10)), clamp to (max - 8), then (x + 4) / 4.
#pragma once

#include <span>
#include <vector>

#include "common/sample_rate.h"

namespace earshot::features {

using earshot::kSampleRate;  // features::kSampleRate, as the Whisper model names it
inline constexpr int kFftSize = 400;
inline constexpr int kHopLength = 160;
inline constexpr int kFftBins = kFftSize / 2 + 1;  // 201
inline constexpr int kChunkSeconds = 30;
inline constexpr int kChunkFrames = kChunkSeconds * kSampleRate / kHopLength;  // 3000

struct Mel {
  int n_mel = 0;
  int n_frames = 0;
  std::vector<float> data;  // [n_mel][n_frames], row-major (row = mel bin), as ggml's conv input wants
};

// Slaney-style mel filter bank as librosa/Whisper computes it: [n_mel][201] row-major.
// Used for 128-bin models whose file carries no filters, and by the model generator.
std::vector<float> mel_filter_bank(int n_mel);

// Log-mel of 16 kHz mono samples. filters is [n_mel][201]. The signal is
// zero-padded at the end by pad_samples (whisper.cpp pads 30 s so that the
// spectrogram of a short clip has >= 3000 frames). n_threads splits the STFT.
Mel log_mel_spectrogram(std::span<const float> samples, std::span<const float> filters, int n_mel,
                        int pad_samples = kChunkSeconds * kSampleRate, int n_threads = 1);

}  // namespace earshot::features

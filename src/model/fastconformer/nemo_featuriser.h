// The featuriser tables NeMo builds for its AudioToMelSpectrogramPreprocessor,
// for files that do not carry them (transcribe.cpp's Parakeet GGUF computes them
// at load, as its own runtime does) and for the random-weight test models.
#pragma once

#include <vector>

namespace earshot::fastconformer {

// librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax, htk=False, norm="slaney"):
// Slaney-scale triangles with area normalisation, [n_mels][n_fft/2 + 1].
std::vector<float> slaney_mel_filters(int n_mels, int n_fft, int sample_rate, double f_min, double f_max);

// torch.hann_window(n, periodic=False), as NeMo's featuriser makes its window.
std::vector<float> symmetric_hann_window(int n);

}  // namespace earshot::fastconformer

// Sample-rate conversion of mono float audio to 16 kHz.
//
// Uses libswresample with its default windowed-sinc filter (32 taps per phase,
// Kaiser window, cutoff 0.97 of the output Nyquist): it is exactly what
// openai-whisper's reference preprocessing (`ffmpeg -ar 16000`) applies, so
// models see the same spectrum they were evaluated with, and the filter is a
// well-tested one rather than ours. 16 kHz input passes through untouched.
#pragma once

#include <span>
#include <vector>

struct SwrContext;

namespace earshot::audio {

class Resampler {
 public:
  explicit Resampler(int input_rate);  // throws earshot::Error(kInvalidAudio) for unusable rates
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  int input_rate() const { return input_rate_; }
  // Appends the 16 kHz samples that the new input makes available.
  void push(std::span<const float> input, std::vector<float>& output);
  // Appends the samples held back in the filter's delay line (end of stream).
  void flush(std::vector<float>& output);

 private:
  void convert(const float* input, int count, std::vector<float>& output);
  int input_rate_;
  SwrContext* swr_ = nullptr;  // null when input_rate is already 16 kHz
};

// Whole-buffer convenience: resamples mono audio at `input_rate` to 16 kHz.
std::vector<float> resample_to_16k(std::span<const float> mono, int input_rate);

}  // namespace earshot::audio

// Sample-rate conversion of mono float audio to 16 kHz.
//
// Uses libswresample with its default windowed-sinc filter (32 taps per phase,
// Kaiser window, cutoff 0.97 of the output Nyquist): it is exactly what
// openai-whisper's reference preprocessing (`ffmpeg -ar 16000`) applies, so
// models see the same spectrum they were evaluated with, and the filter is a
// well-tested one rather than ours. 16 kHz input passes through untouched.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

struct SwrContext;

namespace earshot::audio {

// The input rates earshot takes. 8 kHz (telephone audio) is the lowest any real
// recording uses; below it a rate is a corrupt or hostile header, and upsampling
// from a few Hz turned each input byte into thousands of samples (an 8 Hz WAV of
// 64 KB decoded to 1.3 GB). From 8 kHz up, one input sample makes at most two.
inline constexpr int kMinInputSampleRate = 8000;
inline constexpr int kMaxInputSampleRate = 1'000'000;

// Throws earshot::Error(kInvalidAudio) naming the rate and the range when `rate`
// is outside it; `source` (a file or stream name, may be empty) starts the message.
// Called wherever a rate enters: WAV headers, FFmpeg's streams and frames, the
// resampler, Deepgram's linear16 decoder.
void check_input_rate(int rate, const std::string& source = "");

class Resampler {
 public:
  explicit Resampler(int input_rate);  // throws earshot::Error(kInvalidAudio) outside check_input_rate's range
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  int input_rate() const { return input_rate_; }
  // At most how many samples push() of `input_samples` more (or flush(), 0) appends
  // now: what a caller with an output limit checks before pushing.
  size_t max_output(size_t input_samples) const;
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

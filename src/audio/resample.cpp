#include "audio/resample.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
}

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "audio/audio.h"
#include "common/error.h"

namespace earshot::audio {

void check_input_rate(int rate, const std::string& source) {
  const std::string prefix = source.empty() ? "" : source + ": ";
  if (rate < kMinInputSampleRate) {
    throw Error(ErrorCode::kInvalidAudio,
                prefix + "sample rate " + std::to_string(rate) + " Hz is below the lowest earshot takes, " +
                    std::to_string(kMinInputSampleRate) + " Hz (send audio at 8-48 kHz; 16 kHz needs no resampling)");
  }
  if (rate > kMaxInputSampleRate) {
    throw Error(ErrorCode::kInvalidAudio, prefix + "sample rate " + std::to_string(rate) +
                                              " Hz is above the highest earshot takes, " +
                                              std::to_string(kMaxInputSampleRate) + " Hz");
  }
}

Resampler::Resampler(int input_rate) : input_rate_(input_rate) {
  check_input_rate(input_rate);
  if (input_rate == kSampleRate) return;
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  if (swr_alloc_set_opts2(&swr_, &mono, AV_SAMPLE_FMT_FLT, kSampleRate, &mono, AV_SAMPLE_FMT_FLT, input_rate, 0,
                          nullptr) < 0 ||
      swr_init(swr_) < 0) {
    swr_free(&swr_);
    throw Error(ErrorCode::kInternal, "libswresample could not set up " + std::to_string(input_rate) + " -> 16000 Hz");
  }
}

Resampler::~Resampler() { swr_free(&swr_); }

void Resampler::convert(const float* input, int count, std::vector<float>& output) {
  const int capacity = swr_get_out_samples(swr_, count);
  if (capacity < 0) throw Error(ErrorCode::kInternal, "libswresample failed to size its output");
  const size_t old_size = output.size();
  output.resize(old_size + capacity);
  auto* out = reinterpret_cast<uint8_t*>(output.data() + old_size);
  const auto* in = reinterpret_cast<const uint8_t*>(input);
  const int produced = swr_convert(swr_, &out, capacity, input ? &in : nullptr, count);
  if (produced < 0) throw Error(ErrorCode::kInternal, "libswresample failed to convert");
  output.resize(old_size + produced);
}

size_t Resampler::max_output(size_t input_samples) const {
  if (!swr_) return input_samples;
  // swr_get_out_samples is what convert() sizes its output by; it counts in int, so a
  // larger input is bounded by its rate ratio plus the delay line instead.
  if (input_samples <= (size_t(1) << 20)) {
    const int n = swr_get_out_samples(swr_, int(input_samples));
    if (n >= 0) return size_t(n);
  }
  const auto delay = size_t(std::max<int64_t>(0, swr_get_delay(swr_, kSampleRate)));
  return (input_samples * kSampleRate + size_t(input_rate_) - 1) / size_t(input_rate_) + delay + 64;
}

void Resampler::push(std::span<const float> input, std::vector<float>& output) {
  if (!swr_) {
    output.insert(output.end(), input.begin(), input.end());
    return;
  }
  constexpr size_t kMaxBlock = 1 << 20;  // swr_convert counts in int
  for (size_t pos = 0; pos < input.size(); pos += kMaxBlock) {
    const size_t n = std::min(kMaxBlock, input.size() - pos);
    convert(input.data() + pos, int(n), output);
  }
}

void Resampler::flush(std::vector<float>& output) {
  if (swr_) convert(nullptr, 0, output);
}

std::vector<float> resample_to_16k(std::span<const float> mono, int input_rate) {
  Resampler resampler(input_rate);
  std::vector<float> out;
  out.reserve(size_t(double(mono.size()) * kSampleRate / input_rate) + 64);
  resampler.push(mono, out);
  resampler.flush(out);
  return out;
}

}  // namespace earshot::audio

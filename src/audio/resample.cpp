#include "audio/resample.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
}

#include <climits>
#include <string>

#include "audio/audio.h"
#include "common/error.h"

namespace earshot::audio {

Resampler::Resampler(int input_rate) : input_rate_(input_rate) {
  // 8 Hz .. 1 MHz covers every real recording; beyond that the rate field is corrupt.
  if (input_rate < 8 || input_rate > 1'000'000)
    throw Error(ErrorCode::kInvalidAudio, "unsupported sample rate " + std::to_string(input_rate) + " Hz");
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

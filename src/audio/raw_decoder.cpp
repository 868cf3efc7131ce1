#include "audio/raw_decoder.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "audio/g711.h"
#include "common/error.h"

namespace earshot::audio {

namespace {

float decode_sample(RawEncoding encoding, const uint8_t* bytes) {
  switch (encoding) {
    case RawEncoding::kLinear16:
      return static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(bytes[0] | (bytes[1] << 8)))) / 32768.0f;
    case RawEncoding::kMulaw: return g711_to_float(bytes[0], G711Law::kMu);
    case RawEncoding::kAlaw: return g711_to_float(bytes[0], G711Law::kA);
  }
  return 0.0f;
}

void check_channels(int channels) {
  if (channels < 1 || channels > 64)
    throw Error(ErrorCode::kInvalidAudio, "unsupported channel count " + std::to_string(channels) + " (1 to 64)");
}

// Whole frames of `carry` + `bytes`, the rest kept in `carry`; calls frame(pointer) for each.
template <class Frame>
void for_each_frame(std::vector<uint8_t>& carry, std::span<const uint8_t> bytes, size_t frame_bytes, Frame frame) {
  size_t i = 0;
  if (!carry.empty()) {
    const size_t need = std::min(frame_bytes - carry.size(), bytes.size());
    carry.insert(carry.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(need));
    i = need;
    if (carry.size() < frame_bytes) return;
    frame(carry.data());
    carry.clear();
  }
  for (; i + frame_bytes <= bytes.size(); i += frame_bytes) frame(bytes.data() + i);
  carry.assign(bytes.begin() + static_cast<std::ptrdiff_t>(i), bytes.end());
}

}  // namespace

std::optional<RawEncoding> raw_encoding(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "linear16") return RawEncoding::kLinear16;
  if (lower == "mulaw") return RawEncoding::kMulaw;
  if (lower == "alaw") return RawEncoding::kAlaw;
  return std::nullopt;
}

const char* raw_encoding_name(RawEncoding encoding) {
  switch (encoding) {
    case RawEncoding::kLinear16: return "linear16";
    case RawEncoding::kMulaw: return "mulaw";
    case RawEncoding::kAlaw: return "alaw";
  }
  return "?";
}

int raw_bytes_per_sample(RawEncoding encoding) { return encoding == RawEncoding::kLinear16 ? 2 : 1; }

RawChannelsDecoder::RawChannelsDecoder(RawEncoding encoding, int sample_rate, int channels)
    : encoding_(encoding), sample_rate_(sample_rate) {
  check_channels(channels);
  frame_bytes_ = static_cast<size_t>(raw_bytes_per_sample(encoding)) * static_cast<size_t>(channels);
  for (int c = 0; c < channels; ++c) resamplers_.push_back(std::make_unique<Resampler>(sample_rate));
}

RawChannelsDecoder::~RawChannelsDecoder() = default;
RawChannelsDecoder::RawChannelsDecoder(RawChannelsDecoder&&) noexcept = default;
RawChannelsDecoder& RawChannelsDecoder::operator=(RawChannelsDecoder&&) noexcept = default;

std::vector<std::vector<float>> RawChannelsDecoder::push(std::span<const uint8_t> bytes) {
  const size_t n = resamplers_.size();
  const size_t sample_bytes = frame_bytes_ / n;
  std::vector<std::vector<float>> input(n);
  for (auto& channel : input) channel.reserve((carry_.size() + bytes.size()) / frame_bytes_ + 1);
  for_each_frame(carry_, bytes, frame_bytes_, [&](const uint8_t* frame) {
    for (size_t c = 0; c < n; ++c) input[c].push_back(decode_sample(encoding_, frame + c * sample_bytes));
  });
  std::vector<std::vector<float>> out(n);
  for (size_t c = 0; c < n; ++c) resamplers_[c]->push(input[c], out[c]);
  return out;
}

std::vector<std::vector<float>> RawChannelsDecoder::finish() {
  carry_.clear();
  std::vector<std::vector<float>> out(resamplers_.size());
  for (size_t c = 0; c < resamplers_.size(); ++c) resamplers_[c]->flush(out[c]);
  return out;
}

RawDecoder::RawDecoder(RawEncoding encoding, int sample_rate, int channels)
    : encoding_(encoding),
      sample_bytes_(static_cast<size_t>(raw_bytes_per_sample(encoding))),
      frame_bytes_(sample_bytes_ * static_cast<size_t>(std::max(channels, 1))),
      channels_(channels),
      resampler_(sample_rate) {
  check_channels(channels);
}

std::vector<float> RawDecoder::mix(std::span<const uint8_t> bytes) {
  std::vector<float> mono;
  mono.reserve((carry_.size() + bytes.size()) / frame_bytes_ + 1);
  const float scale = 1.0f / static_cast<float>(channels_);
  for_each_frame(carry_, bytes, frame_bytes_, [&](const uint8_t* frame) {
    if (channels_ == 1) return mono.push_back(decode_sample(encoding_, frame));
    float sum = 0;
    for (int c = 0; c < channels_; ++c) sum += decode_sample(encoding_, frame + static_cast<size_t>(c) * sample_bytes_);
    mono.push_back(sum * scale);
  });
  return mono;
}

std::vector<float> RawDecoder::push(std::span<const uint8_t> bytes) {
  // The output limit (StreamDecoder::set_output_limit) before anything is converted.
  check_output(0, resampler_.max_output((carry_.size() + bytes.size()) / frame_bytes_));
  std::vector<float> out;
  resampler_.push(mix(bytes), out);
  return out;
}

std::vector<float> RawDecoder::finish() {
  carry_.clear();  // a partial frame at the very end carries no sound
  check_output(0, resampler_.max_output(0));
  std::vector<float> out;
  resampler_.flush(out);
  return out;
}

}  // namespace earshot::audio

// Raw (headerless) audio as streaming clients send it: interleaved samples of
// one or more channels, 16-bit little-endian linear PCM or G.711 µ-law/A-law
// bytes, at a rate the client names, in pieces of any size (a piece may end
// inside a sample or a frame: the rest waits for the next piece). Every channel
// comes out resampled to 16 kHz, the rate the models take.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "audio/audio.h"
#include "audio/resample.h"

namespace earshot::audio {

enum class RawEncoding { kLinear16, kMulaw, kAlaw };

// "linear16", "mulaw", "alaw" (any case); nullopt for any other name.
std::optional<RawEncoding> raw_encoding(std::string_view name);
const char* raw_encoding_name(RawEncoding encoding);
int raw_bytes_per_sample(RawEncoding encoding);

class RawChannelsDecoder {
 public:
  // Throws Error(kInvalidAudio) for a rate the resampler cannot take or a channel count outside 1..64.
  RawChannelsDecoder(RawEncoding encoding, int sample_rate, int channels);
  ~RawChannelsDecoder();
  RawChannelsDecoder(RawChannelsDecoder&&) noexcept;
  RawChannelsDecoder& operator=(RawChannelsDecoder&&) noexcept;

  // One vector of 16 kHz samples per channel, each as long as the whole frames received allow.
  std::vector<std::vector<float>> push(std::span<const uint8_t> bytes);
  // End of stream: what the resamplers still hold; a partial frame at the very end carries no sound.
  std::vector<std::vector<float>> finish();

  RawEncoding encoding() const { return encoding_; }
  int sample_rate() const { return sample_rate_; }
  int channels() const { return static_cast<int>(resamplers_.size()); }
  // The seconds of audio per channel that `bytes` more of input hold (before decoding).
  double seconds_in(size_t bytes) const {
    return static_cast<double>(bytes) /
           (static_cast<double>(raw_bytes_per_sample(encoding_)) * channels() * sample_rate_);
  }

 private:
  RawEncoding encoding_;
  int sample_rate_;
  size_t frame_bytes_;
  std::vector<uint8_t> carry_;  // the start of a frame the last piece cut
  std::vector<std::unique_ptr<Resampler>> resamplers_;
};

// One mono stream from raw audio: the channels of each frame averaged, then
// resampled to 16 kHz.
class RawDecoder : public StreamDecoder {
 public:
  RawDecoder(RawEncoding encoding, int sample_rate, int channels = 1);  // throws as RawChannelsDecoder
  std::vector<float> push(std::span<const uint8_t> bytes) override;
  std::vector<float> finish() override;

 private:
  std::vector<float> mix(std::span<const uint8_t> bytes);

  RawEncoding encoding_;
  size_t sample_bytes_;
  size_t frame_bytes_;
  int channels_;
  std::vector<uint8_t> carry_;
  Resampler resampler_;
};

}  // namespace earshot::audio

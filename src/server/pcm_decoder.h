// --pcm-input: raw s16le 16 kHz mono in frames of any size. A frame may end in
// the middle of a sample; the odd byte waits for the next frame. Linear16Decoder:
// the same at another sample rate.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "audio/audio.h"
#include "audio/resample.h"

namespace earshot::server {

class PcmDecoder : public audio::StreamDecoder {
 public:
  std::vector<float> push(std::span<const uint8_t> bytes) override {
    std::vector<float> out;
    out.reserve((bytes.size() + 1) / 2);
    size_t i = 0;
    if (carry_ && !bytes.empty()) {
      out.push_back(sample(*carry_, bytes[0]));
      carry_.reset();
      i = 1;
    }
    for (; i + 1 < bytes.size(); i += 2) out.push_back(sample(bytes[i], bytes[i + 1]));
    if (i < bytes.size()) carry_ = bytes[i];
    return out;
  }
  std::vector<float> finish() override {
    carry_.reset();  // half a sample at the very end carries no sound
    return {};
  }

 private:
  static float sample(uint8_t low, uint8_t high) {
    return static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(low | (high << 8)))) / 32768.0f;
  }
  std::optional<uint8_t> carry_;
};

// Deepgram's encoding=linear16: raw s16le mono at any sample rate, resampled to 16 kHz.
class Linear16Decoder : public audio::StreamDecoder {
 public:
  explicit Linear16Decoder(int sample_rate) : resampler_(sample_rate) {}  // throws Error for unusable rates
  std::vector<float> push(std::span<const uint8_t> bytes) override {
    std::vector<float> out;
    resampler_.push(pcm_.push(bytes), out);
    return out;
  }
  std::vector<float> finish() override {
    std::vector<float> out;
    resampler_.flush(out);
    return out;
  }

 private:
  PcmDecoder pcm_;
  audio::Resampler resampler_;
};

}  // namespace earshot::server

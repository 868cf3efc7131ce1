// --pcm-input: raw s16le 16 kHz mono in frames of any size. A frame may end in
// the middle of a sample; the odd byte waits for the next frame. It honours
// StreamDecoder's output limit before converting anything. (Other rates, channels
// and encodings: audio/raw_decoder.h.)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "audio/audio.h"

namespace earshot::server {

class PcmDecoder : public audio::StreamDecoder {
 public:
  std::vector<float> push(std::span<const uint8_t> bytes) override {
    check_output(0, samples_in(bytes.size()));
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
  // The samples push() makes of `bytes` more bytes.
  size_t samples_in(size_t bytes) const { return (bytes + (carry_ ? 1 : 0)) / 2; }

 private:
  static float sample(uint8_t low, uint8_t high) {
    return static_cast<float>(static_cast<int16_t>(static_cast<uint16_t>(low | (high << 8)))) / 32768.0f;
  }
  std::optional<uint8_t> carry_;
};

}  // namespace earshot::server

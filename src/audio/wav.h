// WAV (RIFF/WAVE) parsing, used by load_file. Exposed for tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace earshot::audio {

struct PcmAudio {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> interleaved;  // frames * channels samples in [-1, 1]
  size_t frames() const { return channels ? interleaved.size() / channels : 0; }
};

// True when the bytes start like a RIFF/WAVE file.
bool looks_like_wav(std::span<const uint8_t> bytes);

// True when the WAV's sample encoding is one parse_wav decodes (PCM 8/16/24/32,
// float 32/64, plain or WAVE_FORMAT_EXTENSIBLE). Others (A-law, ADPCM...) are
// left to FFmpeg. Throws like parse_wav when the header itself is invalid.
bool wav_encoding_supported(std::span<const uint8_t> bytes, const std::string& name);

// Decodes a whole WAV file. Unknown chunks are skipped. Throws
// earshot::Error(kInvalidAudio) naming `name` and what is wrong (truncated
// header or data, missing chunk, inconsistent format fields...).
PcmAudio parse_wav(std::span<const uint8_t> bytes, const std::string& name);

// Averages the channels of interleaved samples into one.
std::vector<float> downmix_to_mono(std::span<const float> interleaved, int channels);

}  // namespace earshot::audio

// Audio input: files of any common format and incremental streams, always
// delivered as 16 kHz mono float samples in [-1, 1].
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "common/sample_rate.h"

namespace earshot::audio {

// Reads a whole file: WAV natively (any rate / channel count / PCM or float),
// other formats (mp3, ogg, opus, webm, flac, m4a...) through FFmpeg's libraries.
// Resamples to 16 kHz mono. Throws earshot::Error(kInvalidAudio / kIo) with the
// file name and the reason.
std::vector<float> load_file(const std::filesystem::path& path);

// False in builds without FFmpeg (EARSHOT_FFMPEG=OFF): load_file then reads WAV
// only and StreamDecoder::create() throws earshot::Error(kUnsupported).
bool ffmpeg_available();

// Converts interleaved s16le PCM at 16 kHz mono to floats.
std::vector<float> pcm_s16le_to_float(std::span<const uint8_t> bytes);

// Decodes one encoded stream (webm/opus from browsers, ogg, mp3, wav...) that
// arrives in arbitrary pieces. One instance per session. push() returns the
// samples that became available; garbage input throws kInvalidAudio.
class StreamDecoder {
 public:
  static std::unique_ptr<StreamDecoder> create();
  virtual ~StreamDecoder() = default;
  virtual std::vector<float> push(std::span<const uint8_t> bytes) = 0;
  // End of stream: returns whatever is still buffered.
  virtual std::vector<float> finish() = 0;
};

}  // namespace earshot::audio

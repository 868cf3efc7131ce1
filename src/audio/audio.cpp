#include "audio/audio.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "audio/ffmpeg_decode.h"
#include "audio/wav.h"
#include "common/error.h"

namespace earshot::audio {

std::vector<float> load_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": is a directory");
  {
    // Only the head decides: other formats go to FFmpeg without being read into memory here.
    std::ifstream in(path, std::ios::binary);
    char head[12] = {};
    if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open: " + std::strerror(errno));
    in.read(head, sizeof head);
    if (in.gcount() == 0) throw Error(ErrorCode::kInvalidAudio, path.string() + ": the file is empty");
    if (!looks_like_wav({reinterpret_cast<const uint8_t*>(head), size_t(in.gcount())}))
      return decode_file_with_ffmpeg(path);
  }
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  // Encodings such as A-law or ADPCM in a WAV container are FFmpeg's job.
  if (!wav_encoding_supported(bytes, path.string())) return decode_file_with_ffmpeg(path);
  return wav_to_16k_mono(bytes, path.string());
}

std::vector<float> pcm_s16le_to_float(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / 2);  // a trailing odd byte is not a sample
  for (size_t i = 0; i < out.size(); ++i) out[i] = int16_t(uint16_t(bytes[2 * i] | (bytes[2 * i + 1] << 8))) / 32768.0f;
  return out;
}

}  // namespace earshot::audio

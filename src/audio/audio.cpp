#include "audio/audio.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "audio/ffmpeg_decode.h"
#include "audio/resample.h"
#include "audio/wav.h"
#include "common/error.h"

namespace earshot::audio {
namespace {

std::vector<uint8_t> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::kIo, path.string() + ": read error");
  return bytes;
}

}  // namespace

std::vector<float> load_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": is a directory");
  {
    std::ifstream in(path, std::ios::binary);
    char head[12] = {};
    if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open: " + std::strerror(errno));
    in.read(head, sizeof head);
    if (in.gcount() == 0) throw Error(ErrorCode::kInvalidAudio, path.string() + ": the file is empty");
    if (!looks_like_wav({reinterpret_cast<const uint8_t*>(head), size_t(in.gcount())}))
      return decode_file_with_ffmpeg(path);
  }
  const std::vector<uint8_t> bytes = read_whole_file(path);
  // Encodings such as A-law or ADPCM in a WAV container are FFmpeg's job.
  if (!wav_encoding_supported(bytes, path.string())) return decode_file_with_ffmpeg(path);
  const PcmAudio pcm = parse_wav(bytes, path.string());
  return resample_to_16k(downmix_to_mono(pcm.interleaved, pcm.channels), pcm.sample_rate);
}

std::vector<float> pcm_s16le_to_float(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / 2);  // a trailing odd byte is not a sample
  for (size_t i = 0; i < out.size(); ++i) out[i] = int16_t(uint16_t(bytes[2 * i] | (bytes[2 * i + 1] << 8))) / 32768.0f;
  return out;
}

}  // namespace earshot::audio

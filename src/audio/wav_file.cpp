#include <cerrno>
#include <cstring>
#include <fstream>

#include "audio/resample.h"
#include "audio/wav.h"
#include "common/error.h"

namespace earshot::audio {

std::vector<float> wav_to_16k_mono(std::span<const uint8_t> bytes, const std::string& name) {
  std::vector<float> out;
  for (const PcmAudio& pcm : parse_wav_files(bytes, name)) {
    const std::vector<float> samples = resample_to_16k(downmix_to_mono(pcm.interleaved, pcm.channels), pcm.sample_rate);
    out.insert(out.end(), samples.begin(), samples.end());
  }
  return out;
}

std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path.string() + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::kIo, path.string() + ": read error");
  return bytes;
}

std::vector<float> load_wav_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  const std::string name = path.string();
  if (bytes.empty()) throw Error(ErrorCode::kInvalidAudio, name + ": the file is empty");
  if (!looks_like_wav(bytes)) throw Error(ErrorCode::kInvalidAudio, name + ": not a WAV file (RIFF/WAVE)");
  if (!wav_encoding_supported(bytes, name)) {
    throw Error(ErrorCode::kUnsupported, name +
                                             ": a WAV encoding that needs FFmpeg (A-law, ADPCM...); convert it to PCM "
                                             "(ffmpeg -i IN -ar 16000 -ac 1 OUT.wav)");
  }
  return wav_to_16k_mono(bytes, name);
}

}  // namespace earshot::audio

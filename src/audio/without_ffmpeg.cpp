// earshot_audio for builds without FFmpeg (EARSHOT_FFMPEG=OFF): WAV files are read
// natively (audio.cpp); everything FFmpeg would decode is refused with the reason.
#include "audio/audio.h"
#include "audio/ffmpeg_decode.h"
#include "common/error.h"

namespace earshot::audio {

bool ffmpeg_available() { return false; }

std::vector<float> decode_file_with_ffmpeg(const std::filesystem::path& path) {
  throw Error(ErrorCode::kUnsupported, path.string() +
                                           ": not a WAV file this earshot can read: it was built without FFmpeg "
                                           "(EARSHOT_FFMPEG=OFF); convert it (ffmpeg -i IN -ar 16000 -ac 1 OUT.wav)");
}

std::unique_ptr<StreamDecoder> StreamDecoder::create() {
  throw Error(ErrorCode::kUnsupported,
              "this earshot was built without FFmpeg (EARSHOT_FFMPEG=OFF): it takes raw PCM streams only");
}

}  // namespace earshot::audio

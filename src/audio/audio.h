// Audio input: files of any common format and incremental streams, always
// delivered as 16 kHz mono float samples in [-1, 1].
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
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

// What StreamDecoder::push() and finish() throw when their input would decode to
// more samples than the decoder's output limit: decoding stopped before making
// them. An Error(kInvalidAudio), so callers that do not look for it report it as
// invalid audio; the server's adapters say which of its limits it was.
class OutputLimitExceeded : public Error {
 public:
  explicit OutputLimitExceeded(size_t limit)
      : Error(ErrorCode::kInvalidAudio, "the input decodes to more than " + seconds_text(limit) +
                                            " s of audio, the most one piece of input may decode to here"),
        limit_(limit) {}
  size_t limit() const { return limit_; }  // samples at 16 kHz
  static std::string seconds_text(size_t samples) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", double(samples) / kSampleRate);
    return text;
  }

 private:
  size_t limit_;
};

// Decodes one encoded stream (webm/opus from browsers, ogg, mp3, wav...) that
// arrives in arbitrary pieces. One instance per session. push() returns the
// samples that became available; garbage input throws kInvalidAudio.
//
// WAV streams (RIFF/WAVE with a known 'data' size) may be several WAV files back to
// back, as clients that send each recorded chunk as a WAV file do: after one file's
// 'data' chunk, the chunks that follow are skipped until a new RIFF/WAVE header,
// which is decoded in turn (its rate and format may differ; the resampler is flushed
// between files). A 'data' size of 0 or 0xFFFFFFFF means "until the end" (streaming
// writers), so nothing after it is a new file.
class StreamDecoder {
 public:
  static std::unique_ptr<StreamDecoder> create();
  virtual ~StreamDecoder() = default;
  virtual std::vector<float> push(std::span<const uint8_t> bytes) = 0;
  // End of stream: returns whatever is still buffered.
  virtual std::vector<float> finish() = 0;

  // The most samples (16 kHz) each later push() or finish() may return; none by
  // default. Input that would decode to more throws OutputLimitExceeded, checked
  // before the samples are made, so a small compressed message (a FLAC of silence,
  // say) cannot make hours of audio in memory. The stream is failed afterwards.
  void set_output_limit(size_t samples) { output_limit_ = samples; }
  size_t output_limit() const { return output_limit_; }

 protected:
  // For implementations: throws OutputLimitExceeded unless `made` samples already
  // returned by this call plus `more` fit in the limit.
  void check_output(size_t made, size_t more) const {
    if (more > output_limit_ || made > output_limit_ - more) throw OutputLimitExceeded(output_limit_);
  }

 private:
  size_t output_limit_ = SIZE_MAX;
};

}  // namespace earshot::audio

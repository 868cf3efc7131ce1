// Internal: FFmpeg decoding shared by load_file and StreamDecoder. Turns the
// packets of a container's best audio stream into 16 kHz mono floats.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audio/resample.h"

struct AVCodecContext;
struct AVFormatContext;
struct AVFrame;
struct AVPacket;

namespace earshot::audio {

// av_strerror as a std::string.
std::string ffmpeg_error_text(int code);

// The most one FFmpeg allocation may take. Demuxers size some buffers from the
// stream's own header fields (a WAV LIST chunk claiming 1.4 GB was allocated
// whole for its metadata: fuzz_regressions/stream_decoder); audio decoding needs
// a few MB, so anything beyond this is a hostile or broken stream, and the
// allocation fails (FFmpeg then reports ENOMEM) instead of reserving it.
inline constexpr size_t kMaxFfmpegAllocation = 64u << 20;

// Once per process, before FFmpeg is used: its logging kept to real errors (it
// would otherwise print per-packet warnings) and its allocations capped at
// kMaxFfmpegAllocation (av_max_alloc, process-wide: earshot's only FFmpeg user is
// this decoding).
void configure_ffmpeg();

class FfmpegAudioDecoder {
 public:
  // Picks the best audio stream of an opened container and opens its decoder.
  // Throws earshot::Error(kInvalidAudio) naming `name` when there is none, it cannot
  // be decoded, or its sample rate is outside check_input_rate's range.
  FfmpegAudioDecoder(AVFormatContext* format, std::string name);
  ~FfmpegAudioDecoder();
  FfmpegAudioDecoder(const FfmpegAudioDecoder&) = delete;
  FfmpegAudioDecoder& operator=(const FfmpegAudioDecoder&) = delete;

  int stream_index() const { return stream_index_; }
  // Called with how many samples at most are about to be appended to the output,
  // before anything is converted or allocated for them: a caller with an output
  // limit throws there (StreamDecoder's OutputLimitExceeded). Unset: no limit.
  void set_output_check(std::function<void(size_t more)> check) { output_check_ = std::move(check); }
  // Decodes one packet of our stream and appends the resulting 16 kHz samples.
  // Corrupt packets are skipped; a long run of them throws kInvalidAudio, and so
  // does a frame whose rate is outside check_input_rate's range or, in a float
  // format, a sample that is NaN or infinite (which would reach the model).
  void decode(const AVPacket* packet, std::vector<float>& output);
  // End of stream: drains the decoder and the resampler.
  void finish(std::vector<float>& output);
  // Samples decoded so far, before resampling (0 means nothing decodable yet).
  size_t decoded_frames() const { return decoded_frames_; }

 private:
  void receive_frames(std::vector<float>& output);
  void emit(const AVFrame* frame, std::vector<float>& output);

  std::string name_;
  int stream_index_ = -1;
  AVCodecContext* codec_ = nullptr;
  AVFrame* frame_ = nullptr;
  std::unique_ptr<Resampler> resampler_;
  std::vector<float> mono_;
  int consecutive_errors_ = 0;
  size_t decoded_frames_ = 0;
  std::function<void(size_t)> output_check_;
};

// Decodes a whole file of any format FFmpeg knows to 16 kHz mono.
std::vector<float> decode_file_with_ffmpeg(const std::filesystem::path& path);

}  // namespace earshot::audio

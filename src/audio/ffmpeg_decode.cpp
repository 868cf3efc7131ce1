#include "audio/ffmpeg_decode.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
}

#include <cmath>
#include <cstdio>
#include <mutex>

#include "common/error.h"

namespace earshot::audio {
namespace {

// More consecutive undecodable packets than this means the stream is not audio we can use.
constexpr int kMaxConsecutiveErrors = 32;

template <typename T>
float sample_as_float(const uint8_t* p);
template <>
float sample_as_float<uint8_t>(const uint8_t* p) {
  return (int(*p) - 128) / 128.0f;
}
template <>
float sample_as_float<int16_t>(const uint8_t* p) {
  return *reinterpret_cast<const int16_t*>(p) / 32768.0f;
}
template <>
float sample_as_float<int32_t>(const uint8_t* p) {
  return float(*reinterpret_cast<const int32_t*>(p) / 2147483648.0);
}
template <>
float sample_as_float<int64_t>(const uint8_t* p) {
  return float(double(*reinterpret_cast<const int64_t*>(p)) / 9223372036854775808.0);
}
template <>
float sample_as_float<float>(const uint8_t* p) {
  return *reinterpret_cast<const float*>(p);
}
template <>
float sample_as_float<double>(const uint8_t* p) {
  return float(*reinterpret_cast<const double*>(p));
}

// Averages all channels of a frame (planar or interleaved) into `mono`.
template <typename T>
void downmix(const AVFrame* frame, int channels, bool planar, std::vector<float>& mono) {
  const int n = frame->nb_samples;
  mono.assign(n, 0.0f);
  for (int c = 0; c < channels; ++c) {
    for (int i = 0; i < n; ++i) {
      const uint8_t* p = planar ? frame->extended_data[c] + size_t(i) * sizeof(T)
                                : frame->extended_data[0] + (size_t(i) * channels + c) * sizeof(T);
      mono[i] += sample_as_float<T>(p);
    }
  }
  if (channels > 1)
    for (float& v : mono) v /= float(channels);
}

struct FormatCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};

}  // namespace

std::string ffmpeg_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof text);
  return text;
}

void configure_ffmpeg() {
  static std::once_flag once;
  std::call_once(once, [] {
    av_log_set_level(AV_LOG_FATAL);
    av_max_alloc(kMaxFfmpegAllocation);
  });
}

FfmpegAudioDecoder::FfmpegAudioDecoder(AVFormatContext* format, std::string name) : name_(std::move(name)) {
  const AVCodec* codec = nullptr;
  stream_index_ = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (stream_index_ < 0) {
    throw Error(ErrorCode::kInvalidAudio, name_ + ": no decodable audio stream (" +
                                              std::string(format->iformat ? format->iformat->name : "?") +
                                              " container: " + ffmpeg_error_text(stream_index_) + ")");
  }
  // A rate the header declares is refused before any packet is decoded (an 8 Hz
  // WAV would be upsampled 2000-fold); frames are checked again (emit).
  if (const int rate = format->streams[stream_index_]->codecpar->sample_rate; rate > 0) check_input_rate(rate, name_);
  codec_ = avcodec_alloc_context3(codec);
  frame_ = av_frame_alloc();
  if (!codec_ || !frame_) throw Error(ErrorCode::kInternal, "out of memory allocating an FFmpeg decoder");
  int rc = avcodec_parameters_to_context(codec_, format->streams[stream_index_]->codecpar);
  codec_->thread_count = 1;  // audio decoding is cheap; one thread per session is plenty
  if (rc >= 0) rc = avcodec_open2(codec_, codec, nullptr);
  if (rc < 0) {
    const std::string codec_name = codec->name;
    avcodec_free_context(&codec_);
    av_frame_free(&frame_);
    throw Error(ErrorCode::kInvalidAudio,
                name_ + ": cannot open the " + codec_name + " decoder: " + ffmpeg_error_text(rc));
  }
}

FfmpegAudioDecoder::~FfmpegAudioDecoder() {
  avcodec_free_context(&codec_);
  av_frame_free(&frame_);
}

void FfmpegAudioDecoder::decode(const AVPacket* packet, std::vector<float>& output) {
  const int rc = avcodec_send_packet(codec_, packet);
  if (rc < 0 && rc != AVERROR_EOF) {
    if (rc != AVERROR_INVALIDDATA && rc != AVERROR(EAGAIN))
      throw Error(ErrorCode::kInvalidAudio, name_ + ": decoder error: " + ffmpeg_error_text(rc));
    if (++consecutive_errors_ > kMaxConsecutiveErrors)
      throw Error(ErrorCode::kInvalidAudio, name_ + ": " + std::to_string(consecutive_errors_) +
                                                " consecutive audio packets could not be decoded (corrupt stream)");
    return;
  }
  receive_frames(output);
}

void FfmpegAudioDecoder::receive_frames(std::vector<float>& output) {
  while (true) {
    const int rc = avcodec_receive_frame(codec_, frame_);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
    if (rc < 0) {
      if (++consecutive_errors_ > kMaxConsecutiveErrors)
        throw Error(ErrorCode::kInvalidAudio, name_ + ": the audio decoder keeps failing: " + ffmpeg_error_text(rc));
      return;
    }
    consecutive_errors_ = 0;
    emit(frame_, output);
    av_frame_unref(frame_);
  }
}

void FfmpegAudioDecoder::emit(const AVFrame* frame, std::vector<float>& output) {
  const int channels = frame->ch_layout.nb_channels;
  if (channels <= 0 || frame->nb_samples <= 0) return;
  if (!resampler_ || resampler_->input_rate() != frame->sample_rate) {
    check_input_rate(frame->sample_rate, name_);
    // A mid-stream rate change (chained Ogg streams) restarts the filter after draining the old one.
    if (resampler_) {
      if (output_check_) output_check_(resampler_->max_output(0));
      resampler_->flush(output);
    }
    resampler_ = std::make_unique<Resampler>(frame->sample_rate);
  }
  // Checked before the frame is converted: a caller's limit stops a decompression
  // bomb (hours of silence in a small FLAC) at the limit, not after making it all.
  if (output_check_) output_check_(resampler_->max_output(size_t(frame->nb_samples)));
  const auto format = AVSampleFormat(frame->format);
  const bool planar = av_sample_fmt_is_planar(format);
  const AVSampleFormat packed = av_get_packed_sample_fmt(format);
  switch (packed) {
    case AV_SAMPLE_FMT_U8: downmix<uint8_t>(frame, channels, planar, mono_); break;
    case AV_SAMPLE_FMT_S16: downmix<int16_t>(frame, channels, planar, mono_); break;
    case AV_SAMPLE_FMT_S32: downmix<int32_t>(frame, channels, planar, mono_); break;
    case AV_SAMPLE_FMT_S64: downmix<int64_t>(frame, channels, planar, mono_); break;
    case AV_SAMPLE_FMT_FLT: downmix<float>(frame, channels, planar, mono_); break;
    case AV_SAMPLE_FMT_DBL: downmix<double>(frame, channels, planar, mono_); break;
    default:
      throw Error(ErrorCode::kUnsupported,
                  name_ + ": unsupported decoded sample format " + std::to_string(int(format)));
  }
  if (packed == AV_SAMPLE_FMT_FLT || packed == AV_SAMPLE_FMT_DBL) {
    // NaN and infinity are no sound: they would reach the model and poison every
    // feature of their window. Only corrupt or hostile streams carry them; refused.
    for (size_t i = 0; i < mono_.size(); ++i) {
      if (!std::isfinite(mono_[i])) {
        char at[48];
        std::snprintf(at, sizeof at, "%.3f", double(decoded_frames_ + i) / frame->sample_rate);
        throw Error(ErrorCode::kInvalidAudio, name_ + ": float sample " + std::to_string(decoded_frames_ + i) +
                                                  " (at " + at +
                                                  " s) is not a finite number (NaN or infinity): the audio is corrupt");
      }
    }
  }
  decoded_frames_ += size_t(frame->nb_samples);
  resampler_->push(mono_, output);
}

void FfmpegAudioDecoder::finish(std::vector<float>& output) {
  decode(nullptr, output);
  if (resampler_) {
    if (output_check_) output_check_(resampler_->max_output(0));
    resampler_->flush(output);
  }
}

std::vector<float> decode_file_with_ffmpeg(const std::filesystem::path& path) {
  configure_ffmpeg();
  const std::string name = path.string();
  AVFormatContext* raw = nullptr;
  int rc = avformat_open_input(&raw, name.c_str(), nullptr, nullptr);
  if (rc < 0) {
    throw Error(rc == AVERROR(ENOENT) || rc == AVERROR(EACCES) ? ErrorCode::kIo : ErrorCode::kInvalidAudio,
                name + ": cannot read as audio: " + ffmpeg_error_text(rc));
  }
  std::unique_ptr<AVFormatContext, FormatCloser> format(raw);
  rc = avformat_find_stream_info(format.get(), nullptr);
  if (rc < 0) throw Error(ErrorCode::kInvalidAudio, name + ": cannot find its streams: " + ffmpeg_error_text(rc));
  FfmpegAudioDecoder decoder(format.get(), name);
  std::unique_ptr<AVPacket, PacketFree> packet(av_packet_alloc());
  std::vector<float> out;
  while ((rc = av_read_frame(format.get(), packet.get())) >= 0) {
    if (packet->stream_index == decoder.stream_index()) decoder.decode(packet.get(), out);
    av_packet_unref(packet.get());
  }
  if (rc != AVERROR_EOF) throw Error(ErrorCode::kInvalidAudio, name + ": read error: " + ffmpeg_error_text(rc));
  decoder.finish(out);
  if (decoder.decoded_frames() == 0) throw Error(ErrorCode::kInvalidAudio, name + ": contains no decodable audio");
  return out;
}

}  // namespace earshot::audio

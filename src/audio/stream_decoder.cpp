// StreamDecoder: one encoded stream arriving in pieces, decoded with FFmpeg.
//
// libavformat demuxers expect a blocking byte source: a read that returns
// "no data yet" is taken as end of file and leaves demuxers (Matroska above
// all) in a broken state. So each decoder runs the demuxer on its own worker
// thread whose read callback blocks until push() supplies bytes. push() hands
// the bytes over and waits until the worker has consumed them all and is
// blocked again: everything decodable is then decoded, packets split across
// pieces are simply completed by a later piece, and the output is identical
// however the stream was cut. Demuxers resynchronising after corrupt data seek
// back (Matroska does); FFmpeg's own buffer serves that only when its last
// reads happened to keep the bytes, which depends on the cuts, so the decoder
// keeps the last kSeekBackBytes read and serves seeks back into them itself.
// Memory stays bounded: bytes are dropped once that far behind, and probing
// looks at most kMaxProbeBytes ahead. Output is bounded too: each push() or
// finish() makes at most the caller's output limit, checked frame by frame
// before a frame is converted (StreamDecoder::set_output_limit).
//
// WAV files back to back: FFmpeg's WAV demuxer, at the end of the 'data' chunk,
// walks on over whatever follows as chunks of the same file, so a second WAV was
// skipped whole as one "RIFF" chunk. So the worker reads a WAV's header itself
// first (peeking, within kMaxProbeBytes) and, when the 'data' size is known,
// lets FFmpeg read only up to the chunk's end; then it skips the chunks that
// follow until a new RIFF/WAVE header, and decodes that file with a new demuxer.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "audio/audio.h"
#include "audio/ffmpeg_decode.h"
#include "common/error.h"

namespace earshot::audio {
namespace {

constexpr int kIoBufferSize = 4096;
// Garbage is rejected once this much was seen without a confident format match.
constexpr int kMaxProbeBytes = 128 * 1024;
// A demuxer that consumes this much without producing audio is skipping garbage.
constexpr size_t kMaxBytesWithoutAudio = 1 << 20;
constexpr int64_t kMaxAnalyzeMicroseconds = 100'000;
// How far back a demuxer may seek (a Matroska cluster of a browser stream is ~20 KB).
constexpr size_t kSeekBackBytes = 256 * 1024;
const char* const kName = "audio stream";

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
bool is_wav_header(const uint8_t* p) { return std::memcmp(p, "RIFF", 4) == 0 && std::memcmp(p + 8, "WAVE", 4) == 0; }

class FfmpegStreamDecoder final : public StreamDecoder {
 public:
  FfmpegStreamDecoder() { configure_ffmpeg(); }
  ~FfmpegStreamDecoder() override {
    {
      std::lock_guard lock(mu_);
      abort_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::vector<float> push(std::span<const uint8_t> bytes) override {
    std::unique_lock lock(mu_);
    if (finished_) throw Error(ErrorCode::kInternal, "StreamDecoder::push called after finish()");
    if (error_) std::rethrow_exception(error_);
    output_made_ = 0;
    if (bytes.empty() || worker_done_) return take_output();  // bytes after the stream's own end are ignored
    if (pending_pos_ > 2 * kSeekBackBytes) {                  // dropped in large steps: rarely moves the kept bytes
      const size_t drop = pending_pos_ - kSeekBackBytes;
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(drop));
      pending_base_ += drop;
      pending_pos_ -= drop;
    }
    pending_.insert(pending_.end(), bytes.begin(), bytes.end());
    worker_starved_ = false;  // until the worker waits for bytes again
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    cv_.notify_all();
    cv_.wait(lock, [&] { return worker_done_ || worker_starved_; });
    if (error_) std::rethrow_exception(error_);
    return take_output();
  }

  std::vector<float> finish() override {
    std::unique_lock lock(mu_);
    if (finished_) return {};
    finished_ = true;
    end_of_input_ = true;
    output_made_ = 0;
    cv_.notify_all();
    if (worker_.joinable()) {
      cv_.wait(lock, [&] { return worker_done_; });
      lock.unlock();
      worker_.join();
      lock.lock();
    }
    if (error_) std::rethrow_exception(error_);
    return take_output();  // an empty stream decodes to no samples
  }

 private:
  std::vector<float> take_output() {
    std::vector<float> out;
    out.swap(output_);
    return out;
  }

  static int read_callback(void* opaque, uint8_t* buffer, int size) {
    return static_cast<FfmpegStreamDecoder*>(opaque)->read(buffer, size);
  }
  static int64_t seek_callback(void* opaque, int64_t offset, int whence) {
    return static_cast<FfmpegStreamDecoder*>(opaque)->seek(offset, whence);
  }

  // Worker thread only: FFmpeg seeks here only backwards past its own buffer (a
  // non-seekable stream reads forward instead). Served within the last
  // kSeekBackBytes read, refused beyond, however the stream was cut.
  int64_t seek(int64_t offset, int whence) {
    whence &= ~AVSEEK_FORCE;
    std::lock_guard lock(mu_);
    const auto position = static_cast<int64_t>(pending_base_ + pending_pos_);
    if (whence == SEEK_CUR) {
      offset += position;
    } else if (whence != SEEK_SET) {
      return AVERROR(ENOSYS);  // AVSEEK_SIZE, SEEK_END: a stream has no known size
    }
    if (offset < static_cast<int64_t>(pending_base_) || offset > position ||
        position - offset > static_cast<int64_t>(kSeekBackBytes))
      return AVERROR(EPIPE);
    pending_pos_ = static_cast<size_t>(offset) - pending_base_;
    return offset;
  }

  // Worker thread, with mu_ held: waits until `n` unread bytes are there, the input
  // ended or the decoder is destroyed; true when they are there. While it waits the
  // worker is starved: push() returns, everything decodable being decoded.
  bool wait_for_bytes(std::unique_lock<std::mutex>& lock, size_t n) {
    while (pending_.size() - pending_pos_ < n && !end_of_input_ && !abort_) {
      worker_starved_ = true;
      cv_.notify_all();
      cv_.wait(lock);
    }
    return !abort_ && pending_.size() - pending_pos_ >= n;
  }

  // Worker thread only: blocks until bytes, end of input or abort. Reads stop at
  // read_limit_ (the end of a WAV file's 'data' chunk), which FFmpeg sees as the end.
  int read(uint8_t* buffer, int size) {
    if (opened_ && consumed_ - consumed_at_last_audio_ > kMaxBytesWithoutAudio) {
      garbage_ = true;
      return AVERROR_INVALIDDATA;
    }
    std::unique_lock lock(mu_);
    const size_t position = pending_base_ + pending_pos_;
    if (position >= read_limit_) return AVERROR_EOF;
    if (!wait_for_bytes(lock, 1)) return abort_ ? AVERROR_EXIT : AVERROR_EOF;
    const size_t n = std::min({size_t(size), pending_.size() - pending_pos_, read_limit_ - position});
    std::memcpy(buffer, pending_.data() + pending_pos_, n);
    pending_pos_ += n;
    consumed_ += n;
    return int(n);
  }

  // Worker thread only: the `n` bytes `at` bytes past the read position, without
  // reading them; false when the input ends before them (or the decoder is destroyed).
  bool peek(size_t at, size_t n, uint8_t* out) {
    std::unique_lock lock(mu_);
    if (!wait_for_bytes(lock, at + n)) return false;
    std::memcpy(out, pending_.data() + pending_pos_ + at, n);
    return true;
  }

  // Worker thread only: reads and drops `n` bytes as they come (nothing is kept for
  // them); false when the input ends first (or the decoder is destroyed).
  bool skip(size_t n) {
    std::unique_lock lock(mu_);
    while (n > 0) {
      if (!wait_for_bytes(lock, 1)) return false;
      const size_t k = std::min(n, pending_.size() - pending_pos_);
      pending_pos_ += k;
      n -= k;
    }
    return true;
  }

  size_t position() {
    std::lock_guard lock(mu_);
    return pending_base_ + pending_pos_;
  }

  // Where a WAV file's 'data' chunk ends in the stream, and whether a pad byte may follow.
  struct WavData {
    size_t end = 0;
    bool odd = false;
  };

  // Worker thread only: when the stream at the read position is a RIFF/WAVE file
  // whose 'data' chunk starts within kMaxProbeBytes and has a known size, where
  // that chunk ends. Waits for the header's bytes (not for the data).
  std::optional<WavData> wav_data() {
    uint8_t header[12];
    if (!peek(0, sizeof header, header) || !is_wav_header(header)) return std::nullopt;
    for (size_t at = 12; at + 8 <= size_t(kMaxProbeBytes);) {
      uint8_t chunk[8];
      if (!peek(at, sizeof chunk, chunk)) return std::nullopt;
      const uint32_t size = le32(chunk + 4);
      if (std::memcmp(chunk, "data", 4) == 0) {
        // 0 and 0xFFFFFFFF: "until the end", as streaming writers put it (FFmpeg reads it so).
        if (size == 0 || size == 0xFFFFFFFFu) return std::nullopt;
        return WavData{position() + at + 8 + size, (size & 1) != 0};
      }
      at += 8 + size_t(size) + (size & 1);
    }
    return std::nullopt;
  }

  // Worker thread only, after a WAV file whose 'data' chunk is `data`: skips what
  // follows (the pad byte, a zero, which some writers leave out; chunks of that file
  // such as LIST) until a RIFF/WAVE header; true when one starts at the read
  // position, false when the input ends first. As audio::parse_wav_files walks a
  // whole buffer.
  bool find_next_wav(const WavData& data) {
    read_limit_ = SIZE_MAX;
    const size_t at = position();
    if (at < data.end && !skip(data.end - at)) return false;
    uint8_t header[12];
    if (data.odd) {
      if (!peek(0, 1, header)) return false;
      if (header[0] == 0 && !skip(1)) return false;
    }
    while (true) {
      if (!peek(0, sizeof header, header)) return false;
      if (is_wav_header(header)) return true;
      const uint32_t size = le32(header + 4);
      if (!skip(8 + size_t(size) + (size & 1))) return false;
    }
  }

  void run() {
    try {
      decode_stream();
    } catch (...) {
      std::lock_guard lock(mu_);
      error_ = std::current_exception();
    }
    std::lock_guard lock(mu_);
    worker_done_ = true;
    worker_starved_ = false;
    cv_.notify_all();
  }

  bool aborted() {
    std::lock_guard lock(mu_);
    return abort_;
  }

  void deliver(std::vector<float>& samples) {
    if (samples.empty()) return;
    consumed_at_last_audio_ = consumed_;
    std::lock_guard lock(mu_);
    output_made_ += samples.size();
    output_.insert(output_.end(), samples.begin(), samples.end());
    samples.clear();
  }

  // Every file of the stream: one, or several WAV files back to back.
  void decode_stream() {
    for (bool first = true;; first = false) {
      const std::optional<WavData> wav = wav_data();
      if (aborted()) return;
      read_limit_ = wav ? wav->end : SIZE_MAX;
      if (!decode_file(first)) return;
      if (!wav || !find_next_wav(*wav)) return;
    }
  }

  // Decodes one file from the read position to its end; false when there was
  // nothing to decode (an empty stream) or the decoder is being destroyed.
  bool decode_file(bool first) {
    struct IoCloser {
      void operator()(AVIOContext* io) const {
        av_freep(&io->buffer);
        avio_context_free(&io);
      }
    };
    auto* io_buffer = static_cast<uint8_t*>(av_malloc(kIoBufferSize));
    std::unique_ptr<AVIOContext, IoCloser> io(
        avio_alloc_context(io_buffer, kIoBufferSize, 0, this, &read_callback, nullptr, &seek_callback));
    if (!io) throw Error(ErrorCode::kInternal, "out of memory allocating an FFmpeg I/O context");
    io->seekable = 0;
    opened_ = false;
    const size_t start = consumed_;

    const AVInputFormat* input_format = nullptr;
    const int score = av_probe_input_buffer2(io.get(), &input_format, "", nullptr, 0, kMaxProbeBytes);
    if (aborted()) return false;
    if (score < 0 || !input_format) {
      if (consumed_ == start) return false;  // an empty stream: no audio and nothing wrong
      throw Error(ErrorCode::kInvalidAudio, std::string(kName) + ": not a recognisable audio format (first " +
                                                std::to_string(consumed_ - start) + " bytes examined)");
    }
    if (score < AVPROBE_SCORE_RETRY) {
      throw Error(ErrorCode::kInvalidAudio, std::string(kName) + ": not a recognisable audio format (best guess " +
                                                input_format->name + " with confidence " + std::to_string(score) +
                                                "/100)");
    }

    AVFormatContext* raw = avformat_alloc_context();
    if (!raw) throw Error(ErrorCode::kInternal, "out of memory allocating an FFmpeg format context");
    raw->pb = io.get();
    raw->flags |= AVFMT_FLAG_CUSTOM_IO;
    raw->probesize = kMaxProbeBytes;  // also bounds what stream-info analysis may queue in memory
    int rc = avformat_open_input(&raw, "", input_format, nullptr);  // frees raw on failure
    if (aborted()) {
      if (rc >= 0) avformat_close_input(&raw);
      return false;
    }
    if (rc < 0) {
      throw Error(ErrorCode::kInvalidAudio,
                  std::string(kName) + ": invalid " + input_format->name + " header: " + ffmpeg_error_text(rc));
    }
    struct FormatCloser {
      void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
    };
    std::unique_ptr<AVFormatContext, FormatCloser> format(raw);
    // Fills in what headers leave open (mp3/flac rates and channels; Opus in Matroska trimming).
    // The packets it reads are queued and returned by av_read_frame; the limit keeps first output prompt.
    format->max_analyze_duration = kMaxAnalyzeMicroseconds;
    rc = avformat_find_stream_info(format.get(), nullptr);
    if (aborted()) return false;
    if (rc < 0) {
      throw Error(ErrorCode::kInvalidAudio, std::string(kName) + " (" + input_format->name +
                                                "): cannot find its streams: " + ffmpeg_error_text(rc));
    }
    FfmpegAudioDecoder decoder(format.get(), std::string(kName) + " (" + input_format->name + ")");
    opened_ = true;
    consumed_at_last_audio_ = consumed_;

    struct PacketFree {
      void operator()(AVPacket* p) const { av_packet_free(&p); }
    };
    std::unique_ptr<AVPacket, PacketFree> packet(av_packet_alloc());
    std::vector<float> samples;
    // The caller's output limit, before each frame is converted: what this call
    // of push() or finish() returned so far, what waits in `samples`, and the frame.
    decoder.set_output_check([&](size_t more) {
      std::lock_guard lock(mu_);
      check_output(output_made_ + samples.size(), more);
    });
    while ((rc = av_read_frame(format.get(), packet.get())) >= 0) {
      if (packet->stream_index == decoder.stream_index()) decoder.decode(packet.get(), samples);
      av_packet_unref(packet.get());
      deliver(samples);
    }
    if (aborted()) return false;
    if (garbage_) {
      throw Error(ErrorCode::kInvalidAudio, std::string(kName) + ": " + std::to_string(kMaxBytesWithoutAudio) +
                                                " bytes without any decodable audio (corrupt or not audio)");
    }
    const bool input_ended = [&] {
      std::lock_guard lock(mu_);
      return end_of_input_;
    }();
    // A stream cut off mid-packet ends with a demuxer error; what was decoded before stays valid.
    if (rc != AVERROR_EOF && !(input_ended && decoder.decoded_frames() > 0)) {
      throw Error(ErrorCode::kInvalidAudio,
                  std::string(kName) + " (" + input_format->name + "): corrupt data: " + ffmpeg_error_text(rc));
    }
    decoder.finish(samples);
    deliver(samples);
    // A later WAV file of a stream may be empty (a client's last chunk, say); the stream's first may not.
    if (first && decoder.decoded_frames() == 0) {
      throw Error(ErrorCode::kInvalidAudio, std::string(kName) + " (" + input_format->name +
                                                "): ended before any audio could be decoded (truncated?)");
    }
    return true;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_:
  std::vector<uint8_t> pending_;  // the bytes from pending_base_ on: the last read ones and those not yet read
  size_t pending_base_ = 0;       // stream offset of pending_[0]
  size_t pending_pos_ = 0;
  bool end_of_input_ = false;
  bool abort_ = false;
  bool finished_ = false;
  bool worker_starved_ = false;
  bool worker_done_ = false;
  std::exception_ptr error_;
  std::vector<float> output_;
  size_t output_made_ = 0;  // samples delivered since the current push() or finish() began
  // Worker thread only:
  size_t read_limit_ = SIZE_MAX;  // stream offset where reads end (a WAV file's 'data' chunk), SIZE_MAX: none
  size_t consumed_ = 0;
  size_t consumed_at_last_audio_ = 0;
  bool opened_ = false;
  bool garbage_ = false;
  std::thread worker_;
};

}  // namespace

bool ffmpeg_available() { return true; }

std::unique_ptr<StreamDecoder> StreamDecoder::create() { return std::make_unique<FfmpegStreamDecoder>(); }

}  // namespace earshot::audio

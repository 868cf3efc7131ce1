// Silero VAD v6 on ggml: speech probabilities per 512-sample window and a
// streaming speech start/end segmenter.
//
// Typical use (one VadModel per process, one SpeechDetector per audio stream):
//   auto model = earshot::vad::VadModel::load("silero-v6.2.0-ggml.bin");
//   earshot::vad::SpeechDetector detector(model);
//   for (each chunk of 16 kHz mono float samples) {
//     auto update = detector.push(chunk);
//     for (const auto& event : update.events) { ... event.kind, event.seconds() ... }
//   }
//   auto tail = detector.finish();  // at end of stream
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/sample_rate.h"

namespace earshot::runtime {
class ByteSource;
}

namespace earshot::vad {

// Silero's 16 kHz model consumes exactly 512 new samples (32 ms) per step.
inline constexpr int kWindowSamples = 512;
// Samples of left context the model sees in addition to each window.
inline constexpr int kContextSamples = 64;

// The loaded Silero weights (whisper.cpp's ggml VAD file format). Immutable after
// load: share one instance between any number of sessions and threads.
class VadModel {
 public:
  struct Impl;

  // Loads a ggml VAD file (e.g. ggml-silero-v6.2.0.bin from whisper.cpp's
  // models/download-vad-model.sh). Throws earshot::Error: kIo when the file
  // cannot be read, kInvalidModel for a wrong magic, truncation (naming the
  // header field or tensor), unknown/duplicate/missing tensors or wrong tensor
  // shapes/types, kUnsupported for hyperparameters other than Silero 16 kHz.
  static std::shared_ptr<const VadModel> load(const std::filesystem::path& path);
  // Same, from bytes already in memory; `source_name` is used in error messages.
  static std::shared_ptr<const VadModel> load_from_memory(std::span<const uint8_t> bytes, std::string_view source_name);

  ~VadModel();
  VadModel(const VadModel&) = delete;
  VadModel& operator=(const VadModel&) = delete;

  const std::string& model_type() const;  // "silero-16k"
  const std::string& version() const;     // "6.2.0"
  const Impl& impl() const { return *impl_; }

 private:
  explicit VadModel(std::unique_ptr<Impl> impl);
  static std::shared_ptr<const VadModel> load_from_source(const runtime::ByteSource& source,
                                                          std::string_view source_name);
  std::unique_ptr<Impl> impl_;
};

// How each window gets its 64 samples of left context (the model's STFT needs
// 640 samples to produce its 4 frames from 512 new ones).
enum class WindowContext {
  // whisper.cpp's computation: every window is reflect-padded by 64 samples on
  // both sides, independently of the previous window. Reproduces whisper.cpp's
  // probabilities (the parity reference); the default.
  kReflect,
  // Silero's own Python wrapper: the last 64 samples of the previous window
  // (zeros at stream start) are prepended, and the 576 samples are reflect-padded
  // by 64 on the right only.
  kPreviousSamples,
};

struct VadSessionOptions {
  WindowContext context = WindowContext::kReflect;
  // ggml CPU threads for one window's graph. The network is tiny (~0.7 MFLOP per
  // window), so 1 is fastest; parallelism comes from running many sessions.
  int n_threads = 1;
};

// Per-stream inference state: LSTM hidden/cell state carried across windows,
// the pending partial window, the previous window's tail, and a private ggml
// compute graph/buffer. Not thread-safe itself; use one per stream.
class VadSession {
 public:
  explicit VadSession(std::shared_ptr<const VadModel> model, VadSessionOptions options = {});
  ~VadSession();
  VadSession(VadSession&&) noexcept;
  VadSession& operator=(VadSession&&) noexcept;

  // Appends 16 kHz mono samples (any chunk size, including 0) and returns the
  // speech probability of every 512-sample window completed by this chunk, in
  // stream order. The result does not depend on how the stream is chunked.
  // Non-finite samples (NaN, inf) are taken as 0 so they cannot corrupt the state.
  std::vector<float> push(std::span<const float> samples);

  // End of stream: computes the pending partial window zero-padded to 512
  // samples (as whisper.cpp does for the last chunk) and returns its
  // probability; nullopt when no samples are pending. The session then behaves
  // as if a full window had been pushed.
  std::optional<float> flush();

  // Back to the state of a new session (zero LSTM state, no pending samples).
  void reset();

  int64_t samples_pushed() const;    // samples given to push() since creation/reset
  int64_t windows_computed() const;  // probabilities returned since creation/reset

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct SpeechEvent {
  enum class Kind { kSpeechStart, kSpeechEnd };
  Kind kind;
  // Stream time in samples at 16 kHz since the stream start (or the last reset).
  int64_t sample;
  double seconds() const { return static_cast<double>(sample) / kSampleRate; }
  bool operator==(const SpeechEvent&) const = default;
};

// The speech/silence rules of Silero's VADIterator, applied to one probability
// per window. Defaults are the server's: threshold 0.5, min silence 100 ms,
// speech pad 30 ms.
struct SegmenterOptions {
  // A window with probability >= threshold is speech; it starts a segment when
  // none is open (and cancels a pending end).
  float threshold = 0.5f;
  // Hysteresis: an open segment only counts silence from windows with
  // probability < negative_threshold. Windows in [negative_threshold, threshold)
  // neither start a segment nor count as silence. A negative value (the
  // default) means threshold - 0.15, as VADIterator does.
  float negative_threshold = -1.0f;
  // An open segment ends once this much time has passed from the end of its
  // first silent window (the end of the silent window that started the count)
  // with no window >= threshold in between; checked at window boundaries, so
  // with 100 ms it takes 4 more windows (128 ms) after the first silent one.
  int min_silence_ms = 100;
  // Widening of each segment: the start moves this much before the first
  // speech window (clamped at 0 and at the previous segment's end); the end is
  // this much after the start of the first silent window (clamped to the audio
  // consumed so far).
  int speech_pad_ms = 30;
  // Samples per probability (the VAD's window).
  int window_samples = kWindowSamples;
  int sample_rate = kSampleRate;
};

// Turns a stream of per-window probabilities into start/end events as soon as
// they are decidable: a start at the first speech window, an end once the
// minimum silence has elapsed. Events therefore describe the past: with the
// defaults a start is reported when its window completes, its sample 62 ms
// earlier (the 32 ms window plus the 30 ms pad); an end is reported 4 windows
// after the first silent one, its sample 130 ms earlier. Starts and ends
// alternate and their samples never decrease. Pure logic, no model.
class SpeechSegmenter {
 public:
  // Throws earshot::Error(kInvalidArgument) for out-of-range options.
  explicit SpeechSegmenter(SegmenterOptions options = {});

  // Consumes the probability of the next window; returns the event it decides.
  std::optional<SpeechEvent> push(float probability);

  // End of stream at `stream_end_sample`: closes an open segment (at its padded
  // pending end when silence had started, else at the stream end, never past the
  // stream end). nullopt when no segment is open.
  std::optional<SpeechEvent> finish(int64_t stream_end_sample);

  void reset();
  bool in_speech() const { return triggered_; }
  // In speech, with silence since a window that may end it, for less than
  // min_silence: the end is decided at the first silent window from there on
  // unless speech comes back. Windows between the thresholds (neither speech nor
  // silence) keep a silence going without ending it; past min_silence such a
  // silence is no longer pending, so a caller never waits on it for long.
  bool end_pending() const {
    return triggered_ && silence_since_.has_value() && current_sample_ - *silence_since_ < min_silence_samples_;
  }
  // Every event still to come points at or after this sample (an end of the
  // open segment at its first silent window's start plus the pad at the
  // earliest; a start one pad before the next window, never before the last
  // end): the audio before it is decided. With the defaults it trails the
  // windows consumed by at most the pad (30 ms) in a pause and not at all in
  // speech, far less than the worst case a caller must otherwise assume (an
  // end pointing 130 ms back, a start 62 ms).
  int64_t decided_until() const;
  const SegmenterOptions& options() const { return options_; }

 private:
  SegmenterOptions options_;
  double negative_threshold_;
  int64_t min_silence_samples_;
  int64_t pad_samples_;
  int64_t current_sample_ = 0;  // end of the last consumed window
  bool triggered_ = false;
  std::optional<int64_t> silence_since_;  // end of the first silent window of a pending end
  int64_t last_end_ = 0;
};

// VadSession + SpeechSegmenter: samples in, probabilities and events out. This
// is what a server session holds per stream (movable; not thread-safe itself,
// while any number of detectors may share one model across threads). After
// finish(), call reset() before feeding a new stream.
class SpeechDetector {
 public:
  explicit SpeechDetector(std::shared_ptr<const VadModel> model, SegmenterOptions segmenter = {},
                          VadSessionOptions session = {});

  struct Update {
    std::vector<float> probabilities;  // one per completed window
    std::vector<SpeechEvent> events;   // in stream order
  };
  Update push(std::span<const float> samples);
  // End of stream: flushes the partial window and closes an open segment at the
  // end of the audio pushed.
  Update finish();
  void reset();
  bool in_speech() const { return segmenter_.in_speech(); }
  bool end_pending() const { return segmenter_.end_pending(); }
  int64_t decided_until() const { return segmenter_.decided_until(); }

 private:
  VadSession session_;
  SpeechSegmenter segmenter_;
};

}  // namespace earshot::vad

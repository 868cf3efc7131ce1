// Speech start/end rules of Silero's VADIterator (utils_vad.py), streaming.
#include <algorithm>

#include "common/error.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "VAD segmenter: " + message);
}

}  // namespace

SpeechSegmenter::SpeechSegmenter(SegmenterOptions options) : options_(options) {
  check(options.threshold > 0.0f && options.threshold <= 1.0f,
        "threshold must be in (0, 1], got " + std::to_string(options.threshold));
  // VADIterator's hysteresis: silence only below threshold - 0.15.
  negative_threshold_ = options.negative_threshold >= 0.0f ? static_cast<double>(options.negative_threshold)
                                                           : static_cast<double>(options.threshold) - 0.15;
  check(negative_threshold_ <= options.threshold, "negative_threshold must be <= threshold, got " +
                                                      std::to_string(negative_threshold_) + " > " +
                                                      std::to_string(options.threshold));
  check(options.min_silence_ms >= 0, "min_silence_ms must be >= 0, got " + std::to_string(options.min_silence_ms));
  check(options.speech_pad_ms >= 0, "speech_pad_ms must be >= 0, got " + std::to_string(options.speech_pad_ms));
  check(options.window_samples > 0, "window_samples must be > 0, got " + std::to_string(options.window_samples));
  check(options.sample_rate > 0, "sample_rate must be > 0, got " + std::to_string(options.sample_rate));
  min_silence_samples_ = static_cast<int64_t>(options.sample_rate) * options.min_silence_ms / 1000;
  pad_samples_ = static_cast<int64_t>(options.sample_rate) * options.speech_pad_ms / 1000;
}

std::optional<SpeechEvent> SpeechSegmenter::push(float probability) {
  const int64_t window = options_.window_samples;
  current_sample_ += window;
  const bool speech = probability >= options_.threshold;
  if (speech) silence_since_.reset();  // speech again: a pending end is cancelled

  if (speech && !triggered_) {
    triggered_ = true;
    // The start of the speech window, widened by the pad; never before the previous
    // segment's end so events stay ordered even with a pad wider than the gap.
    const int64_t start = std::max({int64_t{0}, current_sample_ - window - pad_samples_, last_end_});
    return SpeechEvent{SpeechEvent::Kind::kSpeechStart, start};
  }
  if (triggered_ && probability < negative_threshold_) {
    if (!silence_since_) silence_since_ = current_sample_;
    if (current_sample_ - *silence_since_ < min_silence_samples_) return std::nullopt;
    // The start of the first silent window plus the pad, never past the audio consumed.
    const int64_t end = std::min(*silence_since_ - window + pad_samples_, current_sample_);
    silence_since_.reset();
    triggered_ = false;
    last_end_ = end;
    return SpeechEvent{SpeechEvent::Kind::kSpeechEnd, end};
  }
  return std::nullopt;
}

std::optional<SpeechEvent> SpeechSegmenter::finish(int64_t stream_end_sample) {
  if (!triggered_) return std::nullopt;
  int64_t end = stream_end_sample;
  if (silence_since_) end = std::min(end, *silence_since_ - options_.window_samples + pad_samples_);
  silence_since_.reset();
  triggered_ = false;
  last_end_ = end;
  return SpeechEvent{SpeechEvent::Kind::kSpeechEnd, end};
}

int64_t SpeechSegmenter::decided_until() const {
  if (!triggered_) {
    // A start points at least one pad before the next window, never before the last end.
    return std::clamp(current_sample_ - pad_samples_, last_end_, current_sample_);
  }
  // An end points one pad past its first silent window's start (a pending one's,
  // or a window still to come), never past the audio consumed when decided.
  if (silence_since_) return std::min(*silence_since_ - options_.window_samples + pad_samples_, current_sample_);
  return current_sample_;
}

void SpeechSegmenter::reset() {
  current_sample_ = 0;
  triggered_ = false;
  silence_since_.reset();
  last_end_ = 0;
}

SpeechDetector::SpeechDetector(std::shared_ptr<const VadModel> model, SegmenterOptions segmenter,
                               VadSessionOptions session)
    : session_(std::move(model), session), segmenter_(segmenter) {
  if (segmenter.window_samples != kWindowSamples || segmenter.sample_rate != kSampleRate) {
    throw Error(ErrorCode::kInvalidArgument,
                "SpeechDetector: the Silero VAD needs window_samples = 512 and "
                "sample_rate = 16000 in SegmenterOptions");
  }
}

SpeechDetector::Update SpeechDetector::push(std::span<const float> samples) {
  Update update;
  update.probabilities = session_.push(samples);
  for (float p : update.probabilities) {
    if (auto event = segmenter_.push(p)) update.events.push_back(*event);
  }
  return update;
}

SpeechDetector::Update SpeechDetector::finish() {
  Update update;
  const int64_t stream_end = session_.samples_pushed();
  if (auto p = session_.flush()) {
    update.probabilities.push_back(*p);
    if (auto event = segmenter_.push(*p)) update.events.push_back(*event);
  }
  if (auto event = segmenter_.finish(stream_end)) update.events.push_back(*event);
  // The zero-padded last window extends past the audio; no event may.
  for (SpeechEvent& event : update.events) event.sample = std::min(event.sample, stream_end);
  return update;
}

void SpeechDetector::reset() {
  session_.reset();
  segmenter_.reset();
}

}  // namespace earshot::vad

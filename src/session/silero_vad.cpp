#include "session/silero_vad.h"

#include <algorithm>

namespace earshot::session {

namespace {

std::vector<VadEvent> convert(const std::vector<vad::SpeechEvent>& events) {
  std::vector<VadEvent> out;
  out.reserve(events.size());
  for (const vad::SpeechEvent& e : events) {
    out.push_back(
        {e.kind == vad::SpeechEvent::Kind::kSpeechStart ? VadEvent::Kind::kSpeechStart : VadEvent::Kind::kSpeechEnd,
         e.sample});
  }
  return out;
}

}  // namespace

SileroVad::SileroVad(std::shared_ptr<const vad::VadModel> model, vad::SegmenterOptions options)
    : detector_(std::move(model), options) {
  // An end is decided min_silence after the first silent window (rounded up to
  // windows) and points pad after that window's start; a start points pad before
  // its window. Plus one partial window waiting inside the detector.
  const int64_t window = options.window_samples;
  const int64_t min_silence = static_cast<int64_t>(options.min_silence_ms) * options.sample_rate / 1000;
  const int64_t pad = static_cast<int64_t>(options.speech_pad_ms) * options.sample_rate / 1000;
  const int64_t silence_windows = (min_silence + window - 1) / window + 1;
  max_delay_ = std::max(silence_windows * window, window + pad) + window + pad;
}

std::vector<VadEvent> SileroVad::push(std::span<const float> samples) {
  return convert(detector_.push(samples).events);
}

std::vector<VadEvent> SileroVad::finish() { return convert(detector_.finish().events); }

VadFactory silero_vad_factory(std::shared_ptr<const vad::VadModel> model, vad::SegmenterOptions options) {
  return [model = std::move(model), options] { return std::make_unique<SileroVad>(model, options); };
}

}  // namespace earshot::session

// What a session needs from a voice-activity detector: speech start/end events
// at sample positions of the stream it has been fed. Silero VAD (src/vad/)
// adapts to this; tests use simple deterministic detectors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace earshot::session {

struct VadEvent {
  enum class Kind { kSpeechStart, kSpeechEnd };
  Kind kind;
  // Sample index (16 kHz) counted from the first sample ever pushed. Events may
  // point slightly before the samples of the push that produced them (speech
  // padding); they never point past them.
  int64_t sample;
};

class VoiceActivityDetector {
 public:
  virtual ~VoiceActivityDetector() = default;
  // Feeds consecutive samples of one stream (any chunk size); returns the events
  // decided so far, in stream order, alternating start/end beginning with a start.
  virtual std::vector<VadEvent> push(std::span<const float> samples) = 0;
  // End of stream: events still pending (may close an open speech segment at
  // the stream end; the session handles either way).
  virtual std::vector<VadEvent> finish() = 0;
  // The furthest an event can point back from the end of the samples pushed when
  // it is reported (decision latency: min silence + padding + one window). The
  // session holds this much audio back from the model until the VAD has decided
  // on it, so results never depend on how the stream was chunked.
  virtual int64_t max_event_delay_samples() const = 0;
  // Whether the samples pushed so far end in silence that may end the current
  // speech (an end the detector will decide unless speech comes back): a model
  // pass over the audio released so far then adds little, and the pass that
  // flushes the end is near. False where the detector cannot tell.
  virtual bool end_pending() const { return false; }
  // The sample (counted as events are) before which the detector has decided
  // everything: no event still to come points before it. The session releases
  // audio up to here rather than max_event_delay_samples() back, so speech
  // reaches the model as soon as it is known to be speech. nullopt where the
  // detector cannot tell (the worst case then holds).
  virtual std::optional<int64_t> decided_until() const { return std::nullopt; }
};

using VadFactory = std::function<std::unique_ptr<VoiceActivityDetector>()>;

}  // namespace earshot::session

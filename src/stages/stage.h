// A stage of a stream session's chain: ASR events in, events out (a commit
// layer, translation, diarization...). The session runs every event through its
// stages in order before appending the result to its log; a stage may hold an
// event back, change it, or emit several. One stage instance serves one stream
// and is never called on two threads at once.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "events/event.h"

namespace earshot::stages {

class Stage {
 public:
  virtual ~Stage() = default;
  // Called once per incoming event; `emit` passes events to the next stage (or
  // the log). A stage forwards what it does not change.
  virtual void consume(const events::Event& event, const std::function<void(events::Event)>& emit) = 0;

  // A stage whose work finishes on another thread (translation's model calls)
  // gets this from the session once, before the first event: `post` runs events
  // through the stages after this one and appends them to the log, from any
  // thread, at any time until the stage is destroyed (never from inside
  // consume()). A stage that holds EndOfStream back posts it when it is done.
  using Post = std::function<void(std::vector<events::Event>)>;
  virtual void attach(Post post) { (void)post; }

  // The stream's audio, every sample in order as the session receives it for
  // the model (16 kHz mono, the samples the ASR's VAD sees, pauses included):
  // `start` is the stream time of samples[0]. Called on the session's thread
  // before the events of the same step, never at the same time as consume().
  // A jump in `start` is audio the session skipped (it fell behind). A stage
  // that needs no audio ignores it. Must not block on model work (queue it).
  virtual void audio(std::span<const float> samples, double start) {
    (void)samples;
    (void)start;
  }

  // Once per session step, after the step's events (before the Finalized or
  // EndOfStream a step may end with): the stream's VAD has now heard every sample
  // up to `heard` (stream seconds). A stage whose decisions wait on time passing
  // rather than on an event (turns: the silence after speech) emits here; `emit`
  // passes events to the next stage as in consume(). Called on the session's
  // thread, never at the same time as consume().
  virtual void advance(double heard, const std::function<void(events::Event)>& emit) {
    (void)heard;
    (void)emit;
  }

  // Mid-stream settings (a client's Configure): what this stage would run with under
  // `params` (the stream's whole set, StreamRequest::params names), as parameters,
  // checked, not applied (an events::SettingsChanged applies them in audio order).
  // Throws Error(kInvalidArgument) naming a bad parameter. Empty: the stage has no
  // settings a stream can change. Called from any thread: it reads only what the
  // stage was opened with.
  virtual std::map<std::string, std::string> check_settings(const std::map<std::string, std::string>& params) const {
    (void)params;
    return {};
  }
};

}  // namespace earshot::stages

// A stage of a stream session's chain: ASR events in, events out (a commit
// layer, translation, diarization...). The session runs every event through its
// stages in order before appending the result to its log; a stage may hold an
// event back, change it, or emit several. One stage instance serves one stream
// and is never called on two threads at once.
#pragma once

#include <functional>

#include "events/event.h"

namespace earshot::stages {

class Stage {
 public:
  virtual ~Stage() = default;
  // Called once per incoming event; `emit` passes events to the next stage (or
  // the log). A stage forwards what it does not change.
  virtual void consume(const events::Event& event, const std::function<void(events::Event)>& emit) = 0;
};

}  // namespace earshot::stages

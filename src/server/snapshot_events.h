// A bridge until the stream session emits events itself (branch `events`:
// StreamSession::events_since): reads the events off successive snapshots of a
// session opened with keep_words and a short pause_segmentation_seconds.
// Committed words come with their times; the provisional tail has only text, so
// its words get times spread evenly over [committed_until, transcribed_until];
// pauses show as silence lines (speech ended at their start, resumed at their end).
// Delete with the bridge once the session API lands.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "events/event.h"
#include "session/stream_session.h"

namespace earshot::server {

class SnapshotEvents {
 public:
  // The events between the previous snapshot and this one, in order.
  std::vector<events::Event> next(const session::Snapshot& snapshot);

 private:
  size_t words_seen_ = 0;
  size_t lines_seen_ = 0;
  std::string buffer_;
  std::optional<size_t> silence_line_;  // the last silence line (its end grows while the pause goes on)
  bool in_speech_ = false;
  bool ended_ = false;
};

}  // namespace earshot::server

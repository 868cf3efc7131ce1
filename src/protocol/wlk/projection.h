// WhisperLiveKit's view of a stream: lines (text lines per speaker, silence
// lines for long pauses), the provisional buffer and the status scalars, built
// from the session's events. One Projection per connection; it keeps every
// line, as the protocol's full mode sends them all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events/event.h"
#include "protocol/speaker_gate.h"
#include "protocol/wlk/protocol.h"
#include "session/stream_session.h"

namespace earshot::protocol::wlk {

class Projection {
 public:
  // Lines: a word joins the open line unless its speaker differs (no speaker
  // information counts as speaker 1); a Pause makes a silence line (speaker -2),
  // updated while the pause goes on, and closes the open line. Translation: a
  // segment's text (committed so far, then its final, which replaces it) goes to
  // the line holding the segment's first word; the open segment's draft is
  // buffer_translation. Diarized words join lines once their speakers are named
  // (protocol::SpeakerGate); until then they are buffer_diarization, as
  // WhisperLiveKit shows text waiting for its speaker. Audio the server skipped
  // (AudioSkipped) is a silence line marked "skipped". Turn events set the
  // snapshot's turn (TurnView).
  void apply(const events::Event& event);
  // The lines and buffer so far with `status`'s scalars.
  Snapshot snapshot(const session::StreamStatus& status) const;
  // Applies the session's new events and releases them from its log: the
  // projection is then the log's only reader (the /asr connection).
  Snapshot pull(session::StreamSession& session);
  // The stream ends before the diarizer named every speaker (the server's shutdown):
  // the words held for their speakers join the lines without one; the snapshot
  // then, with `status`'s scalars.
  Snapshot release_held(const session::StreamStatus& status);

 private:
  struct Segment {
    int id = 0;
    int line = -1;
    std::string text;
  };
  void apply_now(const events::Event& event);
  void translation_of_segment(int id, double start, const std::string& text, bool replace);
  void rebuild_translation(int line);

  SpeakerGate gate_;
  std::vector<Line> lines_;
  std::string buffer_;
  std::vector<Segment> segments_;  // translated segments, in order
  std::string buffer_translation_;
  int draft_segment_ = -1;
  int open_line_ = -1;     // text line receiving words, -1 = the next word opens one
  int live_silence_ = -1;  // silence line of the pause going on
  std::optional<TurnView> turn_;
  uint64_t cursor_ = 0;
};

// The projection of everything in the session's log, without releasing it.
Snapshot snapshot_of(const session::StreamSession& session);

}  // namespace earshot::protocol::wlk

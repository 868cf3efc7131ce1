#include "protocol/wlk/projection.h"

#include <algorithm>
#include <variant>

namespace earshot::protocol::wlk {

void Projection::apply(const events::Event& event) {
  if (const auto* committed = std::get_if<events::WordsCommitted>(&event)) {
    for (const Word& w : committed->words) {
      const int speaker = w.speaker > 0 ? w.speaker : 1;
      if (open_line_ >= 0 && lines_[static_cast<size_t>(open_line_)].speaker != speaker) open_line_ = -1;
      if (open_line_ < 0) {
        Line line;
        line.speaker = speaker;
        line.start = w.start;
        line.end = w.end;
        lines_.push_back(std::move(line));
        open_line_ = static_cast<int>(lines_.size()) - 1;
      }
      Line& line = lines_[static_cast<size_t>(open_line_)];
      line.text += w.text;
      line.end = std::max(line.end, w.end);
      if (!w.language.empty()) line.detected_language = w.language;
    }
  } else if (const auto* tail = std::get_if<events::ProvisionalChanged>(&event)) {
    buffer_.clear();
    for (const Word& w : tail->words) buffer_ += w.text;
  } else if (const auto* pause = std::get_if<events::Pause>(&event)) {
    if (live_silence_ >= 0 && lines_[static_cast<size_t>(live_silence_)].start == pause->start) {
      lines_[static_cast<size_t>(live_silence_)].end = pause->end;
    } else {
      lines_.push_back(Line{-2, "", pause->start, pause->end, "", ""});
      live_silence_ = static_cast<int>(lines_.size()) - 1;
    }
    open_line_ = -1;
    if (!pause->ongoing) live_silence_ = -1;
  }
}

Snapshot Projection::snapshot(const session::StreamStatus& status) const {
  Snapshot snap;
  static_cast<session::StreamStatus&>(snap) = status;
  snap.lines = lines_;
  snap.buffer_transcription = buffer_;
  return snap;
}

Snapshot Projection::pull(session::StreamSession& session) {
  session::EventBatch batch = session.events_since(cursor_);
  for (const events::Event& e : batch.events) apply(e);
  cursor_ = batch.next;
  session.release_until(cursor_);
  return snapshot(batch.status);
}

Snapshot snapshot_of(const session::StreamSession& session) {
  session::EventBatch batch = session.events_since(0);
  Projection projection;
  for (const events::Event& e : batch.events) projection.apply(e);
  return projection.snapshot(batch.status);
}

}  // namespace earshot::protocol::wlk

#include "protocol/wlk/projection.h"

#include <algorithm>
#include <variant>

namespace earshot::protocol::wlk {

void Projection::apply(const events::Event& event) {
  for (const events::Event& e : gate_.pass(event)) apply_now(e);
}

void Projection::apply_now(const events::Event& event) {
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
  } else if (const auto* c = std::get_if<events::TranslationCommitted>(&event)) {
    translation_of_segment(c->segment, c->start, c->text, false);
  } else if (const auto* d = std::get_if<events::TranslationDraftChanged>(&event)) {
    buffer_translation_ = d->text;
    draft_segment_ = d->segment;
  } else if (const auto* f = std::get_if<events::SegmentTranslated>(&event)) {
    translation_of_segment(f->segment, f->start, f->translation, true);
    if (draft_segment_ <= f->segment) buffer_translation_.clear();
  } else if (const auto* pause = std::get_if<events::Pause>(&event)) {
    if (live_silence_ >= 0 && lines_[static_cast<size_t>(live_silence_)].start == pause->start) {
      lines_[static_cast<size_t>(live_silence_)].end = pause->end;
    } else {
      lines_.push_back(Line{-2, "", pause->start, pause->end, "", ""});
      live_silence_ = static_cast<int>(lines_.size()) - 1;
    }
    open_line_ = -1;
    if (!pause->ongoing) live_silence_ = -1;
  } else if (const auto* t = std::get_if<events::TurnStarted>(&event)) {
    turn_ = TurnView{t->turn, "speaking", t->at};
  } else if (const auto* t = std::get_if<events::TurnEndLikely>(&event)) {
    turn_ = TurnView{t->turn, "likely_over", t->at};
  } else if (const auto* t = std::get_if<events::TurnResumed>(&event)) {
    turn_ = TurnView{t->turn, "speaking", t->at};
  } else if (const auto* t = std::get_if<events::TurnEnded>(&event)) {
    turn_ = TurnView{t->turn, "ended", t->at};
  } else if (const auto* skip = std::get_if<events::AudioSkipped>(&event)) {
    Line line{-2, "", skip->start, skip->end, "", ""};
    line.skipped = true;
    lines_.push_back(std::move(line));
    open_line_ = -1;
  }
}

void Projection::translation_of_segment(int id, double start, const std::string& text, bool replace) {
  auto it = std::find_if(segments_.begin(), segments_.end(), [&](const Segment& s) { return s.id == id; });
  if (it == segments_.end()) {
    // The text line holding the segment's first word (its words are in the log before it).
    int line = -1;
    for (int i = 0; i < static_cast<int>(lines_.size()); ++i)
      if (lines_[static_cast<size_t>(i)].speaker != -2 && lines_[static_cast<size_t>(i)].start <= start + 1e-6)
        line = i;
    if (line < 0)
      for (int i = static_cast<int>(lines_.size()) - 1; i >= 0 && line < 0; --i)
        if (lines_[static_cast<size_t>(i)].speaker != -2) line = i;
    if (line < 0) return;  // no text line to carry it
    segments_.push_back({id, line, ""});
    it = segments_.end() - 1;
  }
  it->text = replace ? text : it->text + text;
  rebuild_translation(it->line);
}

// A line's translation: its segments' texts in order, a space between two that
// would otherwise run Latin words together.
void Projection::rebuild_translation(int line) {
  std::string out;
  for (const Segment& s : segments_) {
    if (s.line != line || s.text.empty()) continue;
    std::string text = s.text;
    if (!out.empty()) {
      while (!text.empty() && text.front() == ' ') text.erase(text.begin());
      const auto last = static_cast<unsigned char>(out.back());
      const auto first = text.empty() ? 0 : static_cast<unsigned char>(text.front());
      if (last < 0x80 && last != ' ' && first < 0x80 && first != 0) out += ' ';
    }
    out += text;
  }
  lines_[static_cast<size_t>(line)].translation = out;
}

Snapshot Projection::snapshot(const session::StreamStatus& status) const {
  Snapshot snap;
  static_cast<session::StreamStatus&>(snap) = status;
  snap.lines = lines_;
  snap.buffer_transcription = buffer_;
  snap.buffer_translation = buffer_translation_;
  snap.turn = turn_;
  for (const Word& w : gate_.held_words()) snap.buffer_diarization += w.text;
  return snap;
}

Snapshot Projection::pull(session::StreamSession& session) {
  session::EventBatch batch = session.events_since(cursor_);
  for (const events::Event& e : batch.events) apply(e);
  cursor_ = batch.next;
  session.release_until(cursor_);
  return snapshot(batch.status);
}

Snapshot Projection::release_held(const session::StreamStatus& status) {
  apply(events::EndOfStream{});  // the gate releases what it holds, speakers as known
  return snapshot(status);
}

Snapshot snapshot_of(const session::StreamSession& session) {
  session::EventBatch batch = session.events_since(0);
  Projection projection;
  for (const events::Event& e : batch.events) projection.apply(e);
  return projection.snapshot(batch.status);
}

}  // namespace earshot::protocol::wlk

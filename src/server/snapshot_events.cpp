#include "server/snapshot_events.h"

#include <algorithm>
#include <limits>

namespace earshot::server {

namespace {

// " hello wor" -> " hello", " wor", spread evenly over [from, to].
std::vector<Word> tail_words(const std::string& text, double from, double to) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    while (i < text.size() && text[i] == ' ') ++i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (text.find_first_not_of(' ', start) < i) pieces.push_back(text.substr(start, i - start));
  }
  std::vector<Word> out;
  const double step = pieces.empty() ? 0 : std::max(0.0, to - from) / static_cast<double>(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    Word w;
    w.text = pieces[i];
    w.start = from + step * static_cast<double>(i);
    w.end = from + step * static_cast<double>(i + 1);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

std::vector<events::Event> SnapshotEvents::next(const session::Snapshot& snap) {
  using std::in_place_type;  // emplace in place: GCC 12 warns on moving a variant temporary
  std::vector<events::Event> out;
  if (ended_) return out;
  if (!snap.error.empty()) {
    out.emplace_back(in_place_type<events::StreamError>, snap.error);
    out.emplace_back(in_place_type<events::EndOfStream>);
    ended_ = true;
    return out;
  }
  // Speech boundaries and words in audio order: a word before a pause goes before it.
  // Words that started before `limit` (seconds), in one event.
  auto emit_words = [&](double limit) {
    size_t end = words_seen_;
    while (end < snap.words.size() && snap.words[end].start < limit) ++end;
    if (end == words_seen_) return;
    std::vector<Word> words(snap.words.begin() + static_cast<std::ptrdiff_t>(words_seen_),
                            snap.words.begin() + static_cast<std::ptrdiff_t>(end));
    words_seen_ = end;
    out.emplace_back(in_place_type<events::WordsCommitted>, std::move(words));
  };
  for (size_t i = lines_seen_; i < snap.lines.size(); ++i) {
    const session::Line& line = snap.lines[i];
    if (line.speaker == -2) {
      emit_words(line.start);
      if (in_speech_) out.emplace_back(in_place_type<events::SpeechEnded>, line.start);
      in_speech_ = false;
      silence_line_ = i;
    } else if (!in_speech_) {
      out.emplace_back(in_place_type<events::SpeechStarted>,
                       silence_line_ ? snap.lines[*silence_line_].end : line.start);
      in_speech_ = true;
    }
  }
  lines_seen_ = snap.lines.size();
  emit_words(std::numeric_limits<double>::infinity());
  if (snap.buffer_transcription != buffer_) {
    buffer_ = snap.buffer_transcription;
    out.emplace_back(in_place_type<events::ProvisionalChanged>,
                     tail_words(buffer_, snap.committed_until, std::max(snap.committed_until, snap.transcribed_until)));
  }
  if (snap.finished) {
    out.emplace_back(in_place_type<events::EndOfStream>);
    ended_ = true;
  }
  return out;
}

}  // namespace earshot::server

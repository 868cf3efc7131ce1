// Speakers for the live protocols. A diarization stage commits words at once
// (WordsCommitted with speakers_pending) and names their speakers later
// (SpeakersAssigned). A protocol that shows a committed word once, with its
// speaker (WhisperLiveKit's lines, Deepgram's finals), reads the session's events
// through a SpeakerGate: committed words waiting for their speakers are held back,
// with every event after them, and come out in order, their speakers filled in,
// once assigned. Buffers (ProvisionalChanged, TranslationDraftChanged) pass at
// once, and the held words are there to show meanwhile (WhisperLiveKit's
// buffer_diarization, Deepgram's interim results): words are never late, only
// their finals. Without diarization every event passes unchanged.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "events/event.h"

namespace earshot::protocol {

class SpeakerGate {
 public:
  // The events that pass now, in order; SpeakersAssigned is consumed. EndOfStream
  // and StreamError release everything held (a word never assigned stays unknown).
  std::vector<events::Event> pass(const events::Event& event);
  // Committed words held for their speakers, in order (speakers as known so far).
  std::vector<Word> held_words() const;

 private:
  struct Held {
    events::Event event;
    uint64_t first_word = 0;  // WordsCommitted: the stream index of its first word
  };
  void release(std::vector<events::Event>& out, bool all);

  std::deque<Held> held_;
  uint64_t next_word_ = 0;            // stream index of the next committed word
  std::map<uint64_t, int> assigned_;  // speakers of held words, by stream index
};

}  // namespace earshot::protocol

// Which speaker said a word, from speaker-activity frames (WhisperLiveKit's
// rule for its Sortformer backend): the speaker whose activity overlaps the
// word's time span most; when none overlaps, the speaker active nearest to the
// word within `nearest_seconds`; otherwise unknown (never an invented one).
#pragma once

#include <deque>

#include "stages/diarization/activity.h"

namespace earshot::stages::diarization {

struct SpeakerRule {
  float threshold = 0.5f;           // a speaker is active in a frame from this probability on
  double nearest_seconds = 0.5;     // how far the nearest activity may be from a word without overlap
  int max_speakers = kMaxSpeakers;  // speakers beyond it are not heard (--max-speakers)
};

// The speaker of a word spanning [start, end] (1-based, as Word::speaker), -1 =
// unknown. `frames` are on the stream's clock, in time order.
int speaker_of(double start, double end, const std::deque<ActivityFrame>& frames, const SpeakerRule& rule);

}  // namespace earshot::stages::diarization

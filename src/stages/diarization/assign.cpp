#include "stages/diarization/assign.h"

#include <algorithm>

namespace earshot::stages::diarization {

namespace {

// The most probable active speaker of a frame (0-based), -1 = none.
int active_speaker(const ActivityFrame& f, const SpeakerRule& rule) {
  int best = -1;
  for (int s = 0; s < std::min(rule.max_speakers, kMaxSpeakers); ++s)
    if (f.prob[s] >= rule.threshold && (best < 0 || f.prob[s] > f.prob[best])) best = s;
  return best;
}

}  // namespace

int speaker_of(double start, double end, const std::deque<ActivityFrame>& frames, const SpeakerRule& rule) {
  const int speakers = std::min(rule.max_speakers, kMaxSpeakers);
  std::array<double, kMaxSpeakers> overlap{};
  for (const ActivityFrame& f : frames) {
    const double shared = std::min(end, f.end) - std::max(start, f.start);
    if (shared <= 0) continue;
    for (int s = 0; s < speakers; ++s)
      if (f.prob[s] >= rule.threshold) overlap[s] += shared;
  }
  int best = 0;
  for (int s = 1; s < speakers; ++s)
    if (overlap[s] > overlap[best]) best = s;
  if (speakers > 0 && overlap[best] > 0) return best + 1;
  // No overlap (a word in a gap of activity, or of zero length): the nearest activity.
  int nearest = -1;
  double distance = rule.nearest_seconds;
  for (const ActivityFrame& f : frames) {
    const double d = f.end <= start ? start - f.end : f.start >= end ? f.start - end : 0.0;
    if (d > distance || (d == distance && nearest >= 0)) continue;
    const int s = active_speaker(f, rule);
    if (s < 0) continue;
    nearest = s;
    distance = d;
  }
  return nearest >= 0 ? nearest + 1 : -1;
}

}  // namespace earshot::stages::diarization

#include "bench/diarization.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "common/sample_rate.h"
#include "protocol/transcript.h"

namespace earshot::bench {

DiarizedStream diarize_trace(const StreamTrace& trace, std::span<const float> audio, stages::Stage& stage,
                             Clock& clock) {
  DiarizedStream out;
  for (const CommittedWord& w : trace.words) {
    out.words.push_back(w.word);
    out.words.back().speaker = -1;
  }
  const auto take = [&out](events::Event e) {
    if (const auto* s = std::get_if<events::SpeakersAssigned>(&e))
      for (size_t i = 0; i < s->speakers.size(); ++i)
        if (s->first_word + i < out.words.size()) out.words[s->first_word + i].speaker = s->speakers[i];
  };
  // A synchronous stage answers in its calls; anything it posts is taken the same way.
  stage.attach([&take](std::vector<events::Event> events) {
    for (events::Event& e : events) take(std::move(e));
  });
  const auto timed = [&](const auto& call) {
    const double t0 = clock.now();
    call();
    out.compute_seconds += clock.now() - t0;
  };
  size_t fed = 0, next_word = 0;
  const auto feed_until = [&](size_t until) {
    until = std::min(until, audio.size());
    if (until <= fed) return;
    timed([&] { stage.audio(audio.subspan(fed, until - fed), static_cast<double>(fed) / kSampleRate); });
    fed = until;
  };
  for (const Emission& e : trace.emissions) {
    feed_until(static_cast<size_t>(std::lround(e.audio * kSampleRate)));
    const size_t n = std::min(static_cast<size_t>(std::max(0, e.committed)), out.words.size() - next_word);
    if (n > 0) {
      events::WordsCommitted committed;
      committed.words.assign(out.words.begin() + static_cast<std::ptrdiff_t>(next_word),
                             out.words.begin() + static_cast<std::ptrdiff_t>(next_word + n));
      next_word += n;
      timed([&] { stage.consume(committed, take); });
    }
    timed([&] { stage.consume(events::ProvisionalChanged{}, take); });
  }
  feed_until(audio.size());
  if (next_word < out.words.size()) {  // words no emission counted (a trace read back from a baseline)
    events::WordsCommitted committed;
    committed.words.assign(out.words.begin() + static_cast<std::ptrdiff_t>(next_word), out.words.end());
    timed([&] { stage.consume(committed, take); });
  }
  timed([&] { stage.consume(events::EndOfStream{}, take); });
  stage.attach({});
  return out;
}

DiarizedClip score_clip(const Utterance& utterance, const DiarizedStream& stream,
                        const std::optional<SpeakerTruth>& truth) {
  DiarizedClip clip;
  clip.id = utterance.id;
  clip.audio_seconds = utterance.audio_seconds;
  clip.compute_seconds = stream.compute_seconds;
  clip.words = static_cast<long>(stream.words.size());
  for (const Word& w : stream.words) clip.unknown_words += w.speaker < 0;
  std::string file_id = utterance.id, channel = "1";
  if (truth && !truth->segments.empty()) {
    file_id = truth->segments.front().file;
    channel = truth->segments.front().channel;
  }
  for (char& c : file_id)
    if (std::isspace(static_cast<unsigned char>(c))) c = '_';
  if (file_id.empty()) file_id = "audio";
  // Through transcribe's writer and back: the turns its --format rttm file holds.
  clip.turns = parse_rttm(protocol::format_rttm(protocol::segments(stream.words), file_id), "the stage's turns");
  std::set<std::string> speakers;
  for (SpeakerSegment& s : clip.turns) {
    s.channel = channel;
    speakers.insert(s.speaker);
  }
  clip.speakers = static_cast<int>(speakers.size());
  if (truth) {
    clip.truth = truth->path;
    clip.der = score_der(truth->segments, clip.turns, {.collar = kDiarizationCollar, .score_overlap = true, .uem = {}});
    clip.der_no_collar = score_der(truth->segments, clip.turns, {.collar = 0.0, .score_overlap = true, .uem = {}});
  }
  return clip;
}

}  // namespace earshot::bench

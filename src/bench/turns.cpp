#include "bench/turns.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>

#include "common/error.h"
#include "common/json_text.h"
#include "common/sample_rate.h"
#include "session/scheduler.h"

namespace earshot::bench {

namespace {

Clock& or_steady(Clock* clock) {
  static SteadyClock steady;
  return clock ? *clock : steady;
}

size_t samples_of(double seconds) { return static_cast<size_t>(std::lround(seconds * kSampleRate)); }

// Appends `clip` (and its words) at the stream's end; returns where it starts (seconds).
double place(TurnStream& s, const TurnClip& clip) {
  const double at = static_cast<double>(s.samples.size()) / kSampleRate;
  s.samples.insert(s.samples.end(), clip.samples.begin(), clip.samples.end());
  for (const TimedWord& w : clip.words) s.words.push_back({w.text, w.start + at, w.end + at});
  return at;
}

void silence(std::vector<float>& out, double seconds) { out.resize(out.size() + samples_of(seconds), 0.0f); }

// The turn made of `parts` (their speech shifted to where each was placed).
RefTurn turn_of(const std::vector<std::pair<double, const TurnClip*>>& parts) {
  RefTurn t;
  std::vector<SpeechSpan> speech;
  for (const auto& [at, clip] : parts)
    for (const SpeechSpan& s : clip->speech) speech.push_back({s.start + at, s.end + at});
  if (speech.empty()) return t;
  t.start = speech.front().start;
  t.end = speech.back().end;
  for (size_t i = 1; i < speech.size(); ++i)
    if (speech[i].start > speech[i - 1].end) t.pauses.push_back({speech[i - 1].end, speech[i].start});
  t.speaker = parts.front().second->speaker;
  return t;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// Notes every event at the chain's end with the run's clock.
class Probe : public stages::Stage {
 public:
  Probe(std::shared_ptr<std::vector<ProbedEvent>> log, std::shared_ptr<std::mutex> mutex, std::function<double()> clock)
      : log_(std::move(log)), mutex_(std::move(mutex)), clock_(std::move(clock)) {}
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (std::holds_alternative<events::WordsCommitted>(event) || std::holds_alternative<events::SpeechEnded>(event) ||
        std::holds_alternative<events::TurnEnded>(event)) {
      std::lock_guard lock(*mutex_);
      log_->push_back({clock_(), event});
    }
    emit(event);
  }

 private:
  std::shared_ptr<std::vector<ProbedEvent>> log_;
  std::shared_ptr<std::mutex> mutex_;
  std::function<double()> clock_;
};

}  // namespace

const char* to_string(TurnDatasetKind kind) {
  return kind == TurnDatasetKind::kMultiTurn ? "multi-turn" : "two-speaker";
}

TurnDatasetKind parse_turn_dataset_kind(const std::string& name) {
  if (name == "multi-turn") return TurnDatasetKind::kMultiTurn;
  if (name == "two-speaker") return TurnDatasetKind::kTwoSpeaker;
  throw Error(ErrorCode::kInvalidArgument, "--turns must be multi-turn or two-speaker (got '" + name + "')");
}

std::vector<TurnClip> split_at_pauses(const TurnClip& clip, double min_pause) {
  std::vector<TurnClip> out;
  if (clip.speech.empty()) return {clip};
  double cut_from = 0;
  size_t first = 0;
  auto emit = [&](size_t last, double cut_to) {
    TurnClip part;
    part.id = clip.id + "." + std::to_string(out.size());
    part.speaker = clip.speaker;
    const size_t a = std::min(clip.samples.size(), samples_of(cut_from));
    const size_t b = std::min(clip.samples.size(), samples_of(cut_to));
    part.samples.assign(clip.samples.begin() + static_cast<std::ptrdiff_t>(a),
                        clip.samples.begin() + static_cast<std::ptrdiff_t>(b));
    for (size_t i = first; i <= last; ++i)
      part.speech.push_back({clip.speech[i].start - cut_from, clip.speech[i].end - cut_from});
    // The part's words are the clip's whose estimated middles fall inside it, timed
    // again over the part's own speech: the clip-wide estimate spreads words by
    // characters over all of its speech, so a word counted into a phrase's end
    // could lie past the end the streaming VAD finds for that phrase; the reference
    // workload would then hold it back until the next turn's audio arrived.
    std::string text;
    for (const TimedWord& w : clip.words) {
      const double mid = (w.start + w.end) / 2;
      if (mid >= cut_from && mid < cut_to) text += (text.empty() ? "" : " ") + w.text;
    }
    part.words = estimate_word_times(text, part.speech, static_cast<double>(part.samples.size()) / kSampleRate);
    out.push_back(std::move(part));
  };
  for (size_t i = 0; i + 1 < clip.speech.size(); ++i) {
    const double gap = clip.speech[i + 1].start - clip.speech[i].end;
    if (gap < min_pause) continue;
    const double cut = clip.speech[i].end + gap / 2;
    emit(i, cut);
    cut_from = cut;
    first = i + 1;
  }
  emit(clip.speech.size() - 1, static_cast<double>(clip.samples.size()) / kSampleRate);
  return out;
}

TurnStream make_turn_stream(TurnDatasetKind kind, const std::vector<TurnClip>& clips, int rotation, double lead_in) {
  if (clips.empty()) throw Error(ErrorCode::kInvalidArgument, "a turn dataset needs clips");
  if (!(lead_in >= 0)) throw Error(ErrorCode::kInvalidArgument, "a turn stream's lead-in must be >= 0 s");
  TurnStream s;
  s.id = std::string(to_string(kind)) + "-" + std::to_string(rotation);
  silence(s.samples, lead_in);
  const size_t n = clips.size();
  std::vector<const TurnClip*> order;
  if (kind == TurnDatasetKind::kMultiTurn) {
    for (size_t i = 0; i < n; ++i) order.push_back(&clips[(i + static_cast<size_t>(rotation)) % n]);
    static constexpr double gaps[] = {0.8, 1.5, 3.0};
    size_t next = 0;
    for (size_t t = 0; next < order.size(); ++t) {
      std::vector<std::pair<double, const TurnClip*>> parts;
      parts.emplace_back(place(s, *order[next]), order[next]);
      ++next;
      if (t % 3 == 2 && next < order.size()) {  // one turn in three: two clips and a pause in it
        silence(s.samples, 0.3);
        parts.emplace_back(place(s, *order[next]), order[next]);
        ++next;
      }
      s.turns.push_back(turn_of(parts));
      silence(s.samples, gaps[t % 3]);
    }
  } else {
    std::vector<const TurnClip*> a, b;
    for (const TurnClip& c : clips) (c.speaker == 0 ? a : b).push_back(&c);
    if (a.empty() || b.empty()) throw Error(ErrorCode::kInvalidArgument, "a two-speaker dataset needs both speakers");
    const size_t turns = 2 * std::max(a.size(), b.size());
    static constexpr double gaps[] = {0.4, 0.7, 1.0};
    for (size_t t = 0; t < turns; ++t) {
      const std::vector<const TurnClip*>& from = t % 2 == 0 ? a : b;
      const TurnClip* clip = from[(t / 2 + static_cast<size_t>(rotation)) % from.size()];
      s.turns.push_back(turn_of({{place(s, *clip), clip}}));
      silence(s.samples, gaps[t % 3]);
    }
  }
  silence(s.samples, 2.0);
  return s;
}

TurnScore score_turns(const TurnStream& stream, const std::vector<ProbedEvent>& events, int stream_index) {
  TurnScore score;
  const double inf = std::numeric_limits<double>::infinity();
  for (const RefTurn& t : stream.turns) score.pauses += static_cast<long>(t.pauses.size());
  for (const ProbedEvent& p : events)
    if (const auto* e = std::get_if<events::TurnEnded>(&p.event))
      for (const RefTurn& t : stream.turns)
        for (const SpeechSpan& pause : t.pauses)
          if (e->at >= pause.start - 0.1 && e->at < pause.end) ++score.false_ends;
  for (size_t k = 0; k < stream.turns.size(); ++k) {
    const RefTurn& t = stream.turns[k];
    const double next = k + 1 < stream.turns.size() ? stream.turns[k + 1].start : inf;
    const double previous_end = k > 0 ? stream.turns[k - 1].end : -inf;
    const double last_start = t.pauses.empty() ? t.start : t.pauses.back().end;
    TurnDelays d;
    d.stream = stream_index;
    d.turn = static_cast<int>(k);
    d.end_of_speech = t.end;
    double last_word = -inf;
    for (const ProbedEvent& p : events) {
      if (const auto* e = std::get_if<events::SpeechEnded>(&p.event)) {
        if (!d.vad && e->at >= last_start && e->at < next) d.vad = p.wall - t.end;
      } else if (const auto* e = std::get_if<events::TurnEnded>(&p.event)) {
        if (!d.end_of_turn && e->at >= last_start && e->at < next) {
          d.end_of_turn = p.wall - t.end;
          d.reason = e->evidence.reason;
          d.text_continues = e->evidence.trailing_continuation;
        }
      } else if (const auto* e = std::get_if<events::WordsCommitted>(&p.event)) {
        for (const Word& w : e->words) {
          const double mid = (w.start + w.end) / 2;
          if (mid >= previous_end && mid < next) last_word = std::max(last_word, p.wall);
          if (mid >= last_start && mid < next) d.last_part_has_words = true;
        }
      }
    }
    if (last_word > -inf) d.final_text = last_word - t.end;
    if (!d.end_of_turn) ++score.missed_ends;
    score.turns.push_back(std::move(d));
  }
  return score;
}

std::optional<double> delay_percentile(const std::vector<TurnDelays>& turns, std::optional<double> TurnDelays::*delay,
                                       double p) {
  std::vector<double> v;
  for (const TurnDelays& t : turns)
    if (t.*delay) v.push_back(*(t.*delay));
  if (v.empty()) return std::nullopt;
  return percentile(std::move(v), p);
}

TurnRun run_turns(const TurnBenchFactory& factory, const std::vector<TurnStream>& streams,
                  const TurnRunOptions& options, Clock* clock_in) {
  if (streams.empty()) throw Error(ErrorCode::kInvalidArgument, "a turn run needs streams");
  if (options.workers < 1) throw Error(ErrorCode::kInvalidArgument, "--workers must be >= 1");
  if (!(options.frame_seconds > 0)) throw Error(ErrorCode::kInvalidArgument, "frames must be > 0 s");
  Clock& time = or_steady(clock_in);
  std::atomic<double> origin = time.now();
  const auto clock = [&origin, &time] { return time.now() - origin.load(); };
  struct Live {
    std::shared_ptr<session::StreamSession> session;
    std::shared_ptr<std::vector<ProbedEvent>> log = std::make_shared<std::vector<ProbedEvent>>();
    std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
    size_t fed = 0;
    bool ended = false;
  };
  std::vector<Live> live(streams.size());
  TurnRun run;
  double longest = 0;
  for (size_t s = 0; s < streams.size(); ++s) {
    TurnBenchStream stream = factory(static_cast<int>(s));
    stream.processor->warmup();
    stream.stages.push_back(std::make_unique<Probe>(live[s].log, live[s].mutex, clock));
    std::unique_ptr<session::VoiceActivityDetector> vad;
    if (options.vad) vad = options.vad();
    live[s].session = std::make_shared<session::StreamSession>(std::move(stream.processor), std::move(vad),
                                                               options.stream, clock, std::move(stream.stages));
    const double seconds = static_cast<double>(streams[s].samples.size()) / kSampleRate;
    run.audio_seconds += seconds;
    longest = std::max(longest, seconds);
  }
  const size_t frame = std::max<size_t>(1, samples_of(options.frame_seconds));
  const double give_up = longest * 3 + 60;
  {
    session::Scheduler scheduler(options.workers, options.pass_threads);
    origin = time.now();
    for (long k = 1;; ++k) {
      time.sleep_until(origin.load() + static_cast<double>(k) * options.frame_seconds);
      bool all_done = true;
      for (size_t s = 0; s < streams.size(); ++s) {
        Live& l = live[s];
        const std::vector<float>& a = streams[s].samples;
        const size_t due = std::min(a.size(), static_cast<size_t>(k) * frame);
        if (due > l.fed) {
          l.session->push_audio(std::span<const float>(a).subspan(l.fed, due - l.fed));
          l.fed = due;
          scheduler.notify(l.session);
        }
        if (l.fed == a.size() && !l.ended) {
          l.session->end_of_stream();
          l.ended = true;
          scheduler.notify(l.session);
        }
        if (!l.session->done()) all_done = false;
      }
      if (all_done || clock() > give_up) break;
    }
    run.elapsed_seconds = clock();
  }
  for (size_t s = 0; s < streams.size(); ++s) {
    const session::StreamStatus st = live[s].session->status();
    if (!st.error.empty()) run.errors.push_back(streams[s].id + ": " + st.error);
    if (!st.finished && st.error.empty()) run.errors.push_back(streams[s].id + ": not finished in time");
    std::vector<ProbedEvent> log;
    {
      std::lock_guard lock(*live[s].mutex);
      log = *live[s].log;
    }
    TurnScore one = score_turns(streams[s], log, static_cast<int>(s));
    run.score.turns.insert(run.score.turns.end(), one.turns.begin(), one.turns.end());
    run.score.pauses += one.pauses;
    run.score.false_ends += one.false_ends;
    run.score.missed_ends += one.missed_ends;
  }
  return run;
}

void write_turns_json(std::ostream& out, const std::vector<NamedTurnRun>& runs) {
  out << "{\"turns\": [";
  for (size_t r = 0; r < runs.size(); ++r) {
    const TurnRun& run = runs[r].run;
    out << (r ? ",\n" : "\n") << "  {\"system\": " << json_quote(runs[r].system)
        << ", \"audio_seconds\": " << json_number(run.audio_seconds)
        << ", \"elapsed_seconds\": " << json_number(run.elapsed_seconds) << ", \"pauses\": " << run.score.pauses
        << ", \"false_ends\": " << run.score.false_ends << ", \"missed_ends\": " << run.score.missed_ends
        << ", \"errors\": [";
    for (size_t e = 0; e < run.errors.size(); ++e) out << (e ? ", " : "") << json_quote(run.errors[e]);
    out << "], \"turns\": [";
    for (size_t t = 0; t < run.score.turns.size(); ++t) {
      const TurnDelays& d = run.score.turns[t];
      out << (t ? ",\n" : "\n") << "    {\"stream\": " << d.stream << ", \"turn\": " << d.turn
          << ", \"end_of_speech\": " << json_number(d.end_of_speech) << ", \"vad\": " << json_number(d.vad)
          << ", \"final_text\": " << json_number(d.final_text) << ", \"end_of_turn\": " << json_number(d.end_of_turn)
          << ", \"reason\": " << json_quote(d.reason)
          << ", \"text_continues\": " << (d.text_continues ? "true" : "false")
          << ", \"last_part_has_words\": " << (d.last_part_has_words ? "true" : "false") << "}";
    }
    out << "]}";
  }
  out << "\n]}\n";
}

}  // namespace earshot::bench

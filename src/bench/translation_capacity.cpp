#include "bench/translation_capacity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "common/error.h"

namespace earshot::bench {
namespace {

namespace tr = stages::translation;

// Plain, common English words: what a talk's ASR output looks like to the model.
constexpr const char* kPassage[] = {
    "the",    "meeting", "starts", "at",     "nine",  "and",   "we",    "will",  "talk",  "about",
    "the",    "plans",   "for",    "next",   "year",  "first", "our",   "team",  "built", "a",
    "new",    "service", "that",   "people", "can",   "use",   "every", "day",   "then",  "we",
    "looked", "at",      "what",   "worked", "well",  "and",   "what",  "did",   "not",   "so",
    "now",    "we",      "want",   "to",     "share", "the",   "next",  "steps", "with",  "you"};
constexpr int kPassageWords = static_cast<int>(sizeof kPassage / sizeof kPassage[0]);

struct Stream {
  std::unique_ptr<stages::Stage> stage;
  std::vector<Word> words;
  double offset = 0;  // start, seconds after the run's start
  size_t committed = 0;
  std::vector<Word> last_tail;
  std::vector<double> committed_at;  // per word: the run time of the feed that committed it (-1: not yet)
  // Filled from pool threads (post), under the run's mutex.
  bool ended = false;
  double last_draft = -1;
  // Committed-target coverage (target_copies_source), per segment by its first word.
  struct Coverage {
    std::string target;  // committed target text so far, leading spaces dropped
    std::size_t covered = 0;
    bool off_reference = false;
  };
  std::map<std::size_t, Coverage> coverage;
};

std::string without_leading_spaces(std::string s) {
  s.erase(0, s.find_first_not_of(' '));
  return s;
}

// The segment's source through word `last` as the stage writes it (words
// joined, the first one's leading space dropped).
std::string segment_source(const std::vector<Word>& words, std::size_t first, std::size_t last) {
  std::string s;
  for (std::size_t i = first; i <= last; ++i) s += words[i].text;
  return without_leading_spaces(s);
}

// The first word of the segment that starts at `start`, or words.size().
std::size_t first_word_at(const std::vector<Word>& words, double start) {
  for (std::size_t i = 0; i < words.size(); ++i)
    if (std::abs(words[i].start - start) < 1e-9) return i;
  return words.size();
}

// Words of the segment from `first` newly covered by its committed target, or
// with `final_end` >= 0 by its final (every word up to that end); their delays
// go to `delays`.
void cover(Stream& s, std::size_t first, Stream::Coverage& c, double final_end, double now,
           std::vector<double>& delays) {
  const bool whole = final_end >= 0;
  std::size_t end = s.words.size();
  if (whole) {
    end = first;
    while (end < s.words.size() && s.words[end].end <= final_end + 1e-9) ++end;
  }
  while (first + c.covered < end) {
    const std::size_t w = first + c.covered;
    if (!whole) {
      if (c.off_reference) return;
      const std::string want = segment_source(s.words, first, w);
      if (c.target.size() < want.size()) {
        if (!want.starts_with(c.target)) c.off_reference = true;
        return;
      }
      if (!c.target.starts_with(want)) {
        c.off_reference = true;
        return;
      }
    }
    const double at = s.committed_at[w];
    delays.push_back(at < 0 ? 0.0 : std::max(0.0, now - at));
    ++c.covered;
  }
}

}  // namespace

std::vector<Word> scripted_source(const TranslationCapacityOptions& o) {
  std::vector<Word> words;
  const int n = static_cast<int>(std::floor(o.stream_seconds * o.words_per_second));
  for (int i = 0; i < n; ++i) {
    Word w;
    w.text = std::string(i == 0 ? "" : " ") + kPassage[i % kPassageWords];
    if (o.sentence_words > 0 && (i + 1) % o.sentence_words == 0) w.text += ".";
    w.start = i / o.words_per_second;
    w.end = (i + 0.8) / o.words_per_second;
    w.language = o.source_language;
    words.push_back(std::move(w));
  }
  return words;
}

TranslationCapacityRun run_translation_capacity(const tr::TranslationService& service, int sessions,
                                                const TranslationCapacityOptions& o, Clock* clock) {
  if (sessions < 1 || !(o.emission_seconds > 0) || !(o.words_per_second > 0) || !(o.stream_seconds > 0))
    throw Error(ErrorCode::kInvalidArgument, "translation capacity: sessions, emission, rate and length must be > 0");
  TranslationCapacityRun run;
  run.sessions = sessions;
  const tr::TranslationCounts before = service.counts();
  tr::TranslationOptions options = service.defaults();
  options.target_language = o.target_language;

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<double> final_lags, draft_intervals, commit_delays;
  SteadyClock steady;
  if (clock == nullptr) clock = &steady;
  const double t0 = clock->now();
  auto seconds_since_start = [clock, t0] { return clock->now() - t0; };

  std::vector<Stream> streams(static_cast<size_t>(sessions));
  for (int i = 0; i < sessions; ++i) {
    Stream& s = streams[static_cast<size_t>(i)];
    s.words = scripted_source(o);
    s.committed_at.assign(s.words.size(), -1.0);
    s.offset = o.emission_seconds * i / sessions;
    s.stage = service.make_stage(o.source_language, options);
    s.stage->attach([&, i](std::vector<events::Event> events) {
      const double now = seconds_since_start();
      std::lock_guard lock(mutex);
      Stream& st = streams[static_cast<size_t>(i)];
      for (const events::Event& e : events) {
        if (const auto* f = std::get_if<events::SegmentTranslated>(&e)) {
          final_lags.push_back(now - (st.offset + f->end));
          ++run.finals_arrived;
          if (o.target_copies_source) {
            const std::size_t first = first_word_at(st.words, f->start);
            if (first < st.words.size()) cover(st, first, st.coverage[first], f->end, now, commit_delays);
          }
        } else if (std::holds_alternative<events::TranslationDraftChanged>(e) ||
                   std::holds_alternative<events::TranslationCommitted>(e)) {
          const auto* c = std::get_if<events::TranslationCommitted>(&e);
          if (c != nullptr && o.target_copies_source) {
            const std::size_t first = first_word_at(st.words, c->start);
            if (first < st.words.size()) {
              Stream::Coverage& cov = st.coverage[first];
              cov.target = without_leading_spaces(cov.target + c->text);
              cover(st, first, cov, -1.0, now, commit_delays);
            }
          }
          if (st.last_draft >= 0 && now > st.last_draft) draft_intervals.push_back(now - st.last_draft);
          st.last_draft = now;
        } else if (std::holds_alternative<events::EndOfStream>(e)) {
          st.ended = true;
          changed.notify_all();
        }
      }
    });
  }

  // The feeder: each stream's emissions when they are due (as sessions' threads would).
  const auto ignore = [](events::Event) {};
  const int emissions = static_cast<int>(std::ceil(o.stream_seconds / o.emission_seconds));
  struct Due {
    double at;
    int stream;
    int emission;
  };
  std::vector<Due> schedule;
  for (int k = 1; k <= emissions; ++k)
    for (int i = 0; i < sessions; ++i)
      schedule.push_back({streams[static_cast<size_t>(i)].offset + k * o.emission_seconds, i, k});
  std::sort(schedule.begin(), schedule.end(), [](const Due& a, const Due& b) { return a.at < b.at; });
  for (const Due& d : schedule) {
    clock->sleep_until(t0 + d.at);
    Stream& s = streams[static_cast<size_t>(d.stream)];
    const double audio = std::min(d.emission * o.emission_seconds, o.stream_seconds);
    events::WordsCommitted committed;
    // Words wholly spoken by now commit, except the newest tail_words (still provisional).
    size_t spoken = 0;
    while (spoken < s.words.size() && s.words[spoken].end <= audio) ++spoken;
    const bool last = d.emission == emissions;
    const size_t commit_to = last ? s.words.size() : spoken - std::min(spoken, static_cast<size_t>(o.tail_words));
    if (s.committed < commit_to) {
      const double now = seconds_since_start();
      std::lock_guard lock(mutex);
      for (std::size_t w = s.committed; w < commit_to; ++w) s.committed_at[w] = now;
    }
    for (; s.committed < commit_to; ++s.committed) committed.words.push_back(s.words[s.committed]);
    if (!committed.words.empty()) s.stage->consume(committed, ignore);
    if (last) {
      s.stage->consume(events::EndOfStream{}, ignore);
    } else {
      const auto begin = s.words.begin() + static_cast<long>(s.committed);
      s.stage->consume(
          events::ProvisionalChanged{std::vector<Word>(begin, begin + static_cast<long>(spoken - s.committed))},
          ignore);
    }
  }
  const double fed = seconds_since_start();
  {
    std::unique_lock lock(mutex);
    run.drained = changed.wait_for(lock, std::chrono::duration<double>(o.drain_limit), [&] {
      return std::all_of(streams.begin(), streams.end(), [](const Stream& s) { return s.ended; });
    });
  }
  run.wall_seconds = std::max(fed, seconds_since_start());
  for (Stream& s : streams) s.stage.reset();  // waits for a job still running

  const tr::TranslationCounts after = service.counts();
  run.draft_calls = after.draft_calls - before.draft_calls;
  run.final_calls = after.final_calls - before.final_calls;
  run.skipped_drafts = after.skipped_drafts - before.skipped_drafts;
  run.counts.draft_calls = run.draft_calls;
  run.counts.final_calls = run.final_calls;
  run.counts.skipped_drafts = run.skipped_drafts;
  run.counts.prompt_decoded = after.prompt_decoded - before.prompt_decoded;
  run.counts.prompt_reused = after.prompt_reused - before.prompt_reused;
  run.counts.proposed = after.proposed - before.proposed;
  run.counts.accepted = after.accepted - before.accepted;
  run.counts.generated = after.generated - before.generated;
  run.counts.stepped = after.stepped - before.stepped;
  run.audio_seconds = sessions * o.stream_seconds;
  {
    std::lock_guard lock(mutex);
    run.final_lag = make_distribution(final_lags);
    run.draft_interval = make_distribution(draft_intervals);
    run.commit_delay = make_distribution(commit_delays);
    for (const Stream& s : streams)
      for (const auto& [first, c] : s.coverage) run.off_reference_segments += c.off_reference ? 1 : 0;
  }
  // A stream's end is posted after its last final (finals are never skipped),
  // so a drained run has every final.
  const double interval_limit = o.draft_interval_limit > 0 ? o.draft_interval_limit : 2 * o.emission_seconds;
  run.sustained = run.drained && (run.final_lag.count == 0 || run.final_lag.p90 <= o.final_lag_limit) &&
                  (run.draft_interval.count == 0 || run.draft_interval.p90 <= interval_limit);
  return run;
}

}  // namespace earshot::bench

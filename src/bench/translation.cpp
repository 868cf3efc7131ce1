#include "bench/translation.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.h"

namespace earshot::bench {
namespace {

struct SourceWord {
  double start = 0;
  double end = 0;  // clamped to the audio fed when it was committed
};

// Target words as committed text arrives in pieces: a word is complete at the
// whitespace after it (or its segment's final); a CJK character at once.
struct SegmentState {
  bool shown = false;
  std::string pending;
  double pending_delay = 0;
};

size_t code_point_length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
}

bool is_cjk(const std::string& ch) {
  if (ch.size() < 3) return false;
  const auto b0 = static_cast<unsigned char>(ch[0]), b1 = static_cast<unsigned char>(ch[1]);
  // U+2E80 and above (CJK radicals, kana, ideographs, Hangul, full-width forms).
  return b0 > 0xE2 || (b0 == 0xE2 && b1 >= 0xBA);
}

class Accounting {
 public:
  explicit Accounting(TranslationTrace& out) : out_(out) {}

  void source_committed(const Word& w, double audio_fed) {
    source_.push_back({w.start, std::clamp(w.end, 0.0, audio_fed)});
  }

  void on(const events::Event& e, double now) {
    if (const auto* c = std::get_if<events::TranslationCommitted>(&e)) {
      SegmentState& s = segments_[c->segment];
      show(s, c->start, c->text, now);
      const double delay = now - (source_.empty() ? 0.0 : source_.back().end);
      size_t i = 0;
      while (i < c->text.size()) {
        const size_t len = std::min(code_point_length(static_cast<unsigned char>(c->text[i])), c->text.size() - i);
        const std::string ch = c->text.substr(i, len);
        i += len;
        if (ch == " " || ch == "\t" || ch == "\n") {
          flush(s);
        } else if (is_cjk(ch)) {
          flush(s);
          s.pending = ch;
          s.pending_delay = delay;
          flush(s);
        } else {
          s.pending += ch;
          s.pending_delay = delay;
        }
      }
    } else if (const auto* d = std::get_if<events::TranslationDraftChanged>(&e)) {
      show(segments_[d->segment], d->start, d->text, now);
    } else if (const auto* f = std::get_if<events::SegmentTranslated>(&e)) {
      SegmentState& s = segments_[f->segment];
      flush(s);
      out_.final_lags.push_back(now - std::min(f->end, now));
      if (!f->translation.empty()) out_.translation += (out_.translation.empty() ? "" : " ") + f->translation;
      segments_.erase(f->segment);
    }
  }

 private:
  void show(SegmentState& s, double segment_start, const std::string& text, double now) {
    if (s.shown || text.empty()) return;
    s.shown = true;
    // The segment's first source word: the committed word starting where the segment does.
    double end = segment_start;
    for (auto it = source_.rbegin(); it != source_.rend(); ++it)
      if (std::abs(it->start - segment_start) < 1e-9) {
        end = it->end;
        break;
      }
    out_.first_draft_delays.push_back(std::max(0.0, now - end));
  }
  void flush(SegmentState& s) {
    if (s.pending.empty()) return;
    out_.committed_words.push_back(s.pending);
    out_.commit_delays.push_back(std::max(0.0, s.pending_delay));
    s.pending.clear();
  }

  TranslationTrace& out_;
  std::vector<SourceWord> source_;
  std::map<int, SegmentState> segments_;
};

}  // namespace

TranslationTrace translate_trace(const StreamTrace& trace, stages::Stage& stage, Pacing pacing, Clock& clock,
                                 const CallCounter& calls) {
  TranslationTrace out;
  out.audio_seconds = trace.audio_seconds;
  const std::pair<long, long> calls_before = calls ? calls() : std::pair<long, long>{0, 0};
  Accounting accounting(out);
  double busy_until = 0;  // realtime: the stream's translation worker
  size_t next_word = 0;
  const bool tails = trace.tails.size() == trace.emissions.size();
  std::vector<Word> last_tail;
  auto feed = [&](const events::Event& in, double ready) {
    std::vector<events::Event> produced;
    const double t0 = clock.now();
    stage.consume(in, [&](events::Event e) { produced.push_back(std::move(e)); });
    const double compute = clock.now() - t0;
    out.compute_seconds += compute;
    double now = ready;
    if (pacing == Pacing::kRealtime) {
      busy_until = std::max(busy_until, ready) + compute;
      now = busy_until;
    }
    for (const events::Event& e : produced) accounting.on(e, now);
  };
  for (size_t i = 0; i < trace.emissions.size(); ++i) {
    const Emission& em = trace.emissions[i];
    const double ready = pacing == Pacing::kRealtime ? em.wall : em.audio;
    events::WordsCommitted committed;
    for (int k = 0; k < em.committed && next_word < trace.words.size(); ++k, ++next_word) {
      committed.words.push_back(trace.words[next_word].word);
      accounting.source_committed(trace.words[next_word].word, em.audio);
    }
    if (!committed.words.empty()) feed(committed, ready);
    if (tails) {
      const std::vector<Word>& tail = trace.tails[i];
      const bool same = tail.size() == last_tail.size() &&
                        std::equal(tail.begin(), tail.end(), last_tail.begin(), [](const Word& a, const Word& b) {
                          return a.text == b.text && a.start == b.start && a.end == b.end;
                        });
      if (!same) feed(events::ProvisionalChanged{tail}, ready);
      last_tail = tail;
    }
  }
  const double end =
      trace.emissions.empty() ? 0 : (pacing == Pacing::kRealtime ? trace.emissions.back().wall : trace.audio_seconds);
  feed(events::EndOfStream{}, end);
  if (calls) {
    const std::pair<long, long> after = calls();
    out.draft_calls = after.first - calls_before.first;
    out.final_calls = after.second - calls_before.second;
  }
  return out;
}

TranslationSummary summarize_translation(const std::string& target_language,
                                         const std::vector<TranslationTrace>& traces,
                                         const std::vector<std::string>& references) {
  if (references.size() != traces.size())
    throw Error(ErrorCode::kInternal, "summarize_translation: one reference per trace expected");
  TranslationSummary s;
  s.target_language = target_language;
  std::vector<double> first, commit, final_lag;
  ChrfStats stats;
  for (size_t i = 0; i < traces.size(); ++i) {
    const TranslationTrace& t = traces[i];
    first.insert(first.end(), t.first_draft_delays.begin(), t.first_draft_delays.end());
    commit.insert(commit.end(), t.commit_delays.begin(), t.commit_delays.end());
    final_lag.insert(final_lag.end(), t.final_lags.begin(), t.final_lags.end());
    s.committed_words += static_cast<long>(t.committed_words.size());
    s.segments += static_cast<long>(t.final_lags.size());
    s.compute_seconds += t.compute_seconds;
    s.audio_seconds += t.audio_seconds;
    s.draft_calls += t.draft_calls;
    s.final_calls += t.final_calls;
    if (!references[i].empty()) {
      stats += chrf_statistics(t.translation, references[i]);
      ++s.chrf_streams;
    }
  }
  s.first_draft_delay = make_distribution(std::move(first));
  s.commit_delay = make_distribution(std::move(commit));
  s.final_lag = make_distribution(std::move(final_lag));
  if (s.chrf_streams > 0) s.chrf = chrf_score(stats);
  return s;
}

}  // namespace earshot::bench

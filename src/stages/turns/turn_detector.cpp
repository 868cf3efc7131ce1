#include "stages/turns/turn_detector.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string_view>

namespace earshot::stages::turns {

namespace {

// Closing marks that may follow a sentence's end: quotes and brackets.
bool strip_closing(std::string& s) {
  static constexpr std::array<std::string_view, 9> closing = {"\"",
                                                              "'",
                                                              ")",
                                                              "]",
                                                              "\xE2\x80\x9D" /* ” */,
                                                              "\xE2\x80\x99" /* ’ */,
                                                              "\xC2\xBB" /* » */,
                                                              "\xE3\x80\x8D" /* 」 */,
                                                              "\xE3\x80\x8F" /* 』 */};
  for (std::string_view c : closing)
    if (s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0) {
      s.resize(s.size() - c.size());
      return true;
    }
  return false;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Words after which a speaker usually goes on: conjunctions, fillers, articles and
// prepositions (English; other languages fall back to punctuation and the model).
bool continues(const std::string& word) {
  static constexpr std::array<std::string_view, 34> words = {
      "and", "but", "or", "so", "because", "um",   "uh",    "er",    "erm",   "hmm",  "like", "the",
      "a",   "an",  "to", "of", "with",    "for",  "if",    "that",  "which", "then", "my",   "your",
      "our", "in",  "on", "at", "from",    "when", "while", "until", "than",  "nor"};
  return std::find(words.begin(), words.end(), word) != words.end();
}

}  // namespace

TextShape text_shape(const std::vector<Word>& words) {
  TextShape shape;
  if (words.empty()) return shape;
  std::string last = words.back().text;
  while (!last.empty() && std::isspace(static_cast<unsigned char>(last.back()))) last.pop_back();
  while (strip_closing(last)) {
  }
  if (ends_with(last, "...") || ends_with(last, "\xE2\x80\xA6" /* … */)) return shape;  // trailing off: neither
  static constexpr std::array<std::string_view, 6> enders = {
      ".", "?", "!", "\xE3\x80\x82" /* 。 */, "\xEF\xBC\x9F" /* ？ */, "\xEF\xBC\x81" /* ！ */};
  for (std::string_view e : enders)
    if (ends_with(last, e)) {
      shape.sentence_end = true;
      return shape;
    }
  static constexpr std::array<std::string_view, 5> joiners = {",", ";", ":", "-", "\xEF\xBC\x8C" /* ， */};
  for (std::string_view j : joiners)
    if (ends_with(last, j)) {
      shape.trailing_continuation = true;
      return shape;
    }
  std::string bare;
  for (char c : last)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '\'')
      bare += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  shape.trailing_continuation = continues(bare);
  return shape;
}

double text_prior(const TextShape& shape, bool has_words) {
  if (!has_words) return 0.5;
  if (shape.sentence_end) return 0.9;
  if (shape.trailing_continuation) return 0.2;
  return 0.65;
}

void TurnDetector::open(double at, const Emit& emit) {
  state_ = State::kOngoing;
  words_.clear();
  emit(events::TurnStarted{turn_, at});
}

void TurnDetector::resume(double at, const Emit& emit) {
  state_ = State::kOngoing;
  emit(events::TurnResumed{turn_, at});
}

void TurnDetector::end(double at, double confidence, events::TurnEvidence evidence, const Emit& emit) {
  emit(events::TurnEnded{turn_, at, confidence, std::move(evidence)});
  ++turn_;
  state_ = State::kIdle;
  words_.clear();
  scored_text_.clear();
  scored_ = -1;
}

double TurnDetector::speech_end() const {
  if (saw_vad_ && !in_speech_) return speech_ended_at_;
  if (!words_.empty()) return words_.back().end;
  return heard_;
}

events::TurnEvidence TurnDetector::evidence(double silence) {
  events::TurnEvidence e;
  e.silence_seconds = std::max(0.0, silence);
  e.all_committed = tail_.empty();
  const TextShape shape = text_shape(words_);
  e.sentence_end = shape.sentence_end;
  e.trailing_continuation = shape.trailing_continuation;
  if (scorer_ && !words_.empty()) {
    std::string text;
    for (const Word& w : words_) text += w.text;
    if (text != scored_text_) {
      scored_text_ = text;
      scored_ = std::clamp(scorer_->end_of_turn_probability(text), 0.0, 1.0);
    }
    e.semantic = scored_;
  }
  return e;
}

double TurnDetector::confidence(const events::TurnEvidence& e) const {
  const double prior =
      e.semantic >= 0 ? e.semantic : text_prior({e.sentence_end, e.trailing_continuation}, !words_.empty());
  const double scale = std::max(1e-3, settings_.silence_scale_seconds);
  return 1.0 - (1.0 - prior) * std::exp(-e.silence_seconds / scale);
}

void TurnDetector::on_event(const events::Event& event, const Emit& emit) {
  if (failed_) return;
  if (const auto* w = std::get_if<events::WordsCommitted>(&event)) {
    if (w->words.empty()) return;
    if (state_ == State::kIdle) open(w->words.front().start, emit);
    if (state_ == State::kLikelyOver) resume(w->words.front().start, emit);
    words_.insert(words_.end(), w->words.begin(), w->words.end());
  } else if (const auto* p = std::get_if<events::ProvisionalChanged>(&event)) {
    tail_ = p->words;
    if (tail_.empty()) return;
    if (state_ == State::kIdle) open(tail_.front().start, emit);
    if (state_ == State::kLikelyOver) resume(tail_.front().start, emit);
  } else if (const auto* s = std::get_if<events::SpeechStarted>(&event)) {
    // The pause that ends here was heard whole, whatever the steps that carried it: a
    // session that fell behind runs one step over a speech end, its silence and the next
    // start, and its clock tick comes after them all. The pause decides first, on the
    // audio clock (a gap of skipped audio is no pause).
    if (saw_vad_ && !in_speech_ && !pause_is_skip_) {
      heard_ = std::max(heard_, s->at);
      decide(emit);
    }
    pause_is_skip_ = false;
    saw_vad_ = true;
    in_speech_ = true;
    if (state_ == State::kIdle) open(s->at, emit);
    if (state_ == State::kLikelyOver) resume(s->at, emit);
  } else if (const auto* e = std::get_if<events::SpeechEnded>(&event)) {
    in_speech_ = false;
    speech_ended_at_ = e->at;
    pause_is_skip_ = false;
  } else if (const auto* k = std::get_if<events::AudioSkipped>(&event)) {
    // Skipped audio inside speech comes as a speech end at the gap's start and a start at its end.
    if (saw_vad_ && !in_speech_ && k->start == speech_ended_at_) pause_is_skip_ = true;
  } else if (const auto* f = std::get_if<events::Finalized>(&event)) {
    if (state_ == State::kIdle) return;
    const double at = saw_vad_ && !in_speech_ ? speech_ended_at_ : f->at;
    events::TurnEvidence ev = evidence(in_speech_ || !saw_vad_ ? 0.0 : heard_ - speech_ended_at_);
    ev.reason = "finalize";
    const double c = confidence(ev);
    end(at, c, std::move(ev), emit);
  } else if (std::holds_alternative<events::StreamError>(event)) {
    failed_ = true;
  } else if (std::holds_alternative<events::EndOfStream>(event)) {
    if (state_ == State::kIdle) return;
    events::TurnEvidence ev = evidence(in_speech_ || !saw_vad_ ? 0.0 : heard_ - speech_ended_at_);
    ev.reason = "end_of_stream";
    const double c = confidence(ev);
    end(speech_end(), c, std::move(ev), emit);
  }
}

void TurnDetector::advance(double heard, const Emit& emit) {
  heard_ = std::max(heard_, heard);
  if (!failed_) decide(emit);
}

void TurnDetector::decide(const Emit& emit) {
  // Silence is known from the VAD only: without one a turn ends when the client
  // flushes or the stream ends. Every word heard must be committed first.
  if (state_ == State::kIdle || !saw_vad_ || in_speech_ || !tail_.empty()) return;
  const double silence = heard_ - speech_ended_at_;
  if (settings_.silence_seconds) {
    if (silence < *settings_.silence_seconds) return;
    events::TurnEvidence ev = evidence(silence);
    ev.reason = "silence";
    return end(speech_ended_at_, 1.0, std::move(ev), emit);
  }
  events::TurnEvidence ev = evidence(silence);
  const double c = confidence(ev);
  if (silence >= settings_.timeout_seconds) {
    ev.reason = "timeout";
    return end(speech_ended_at_, c, std::move(ev), emit);
  }
  if (settings_.eot_threshold < 1.0 && c >= settings_.eot_threshold) {
    ev.reason = ev.semantic >= 0 ? "semantic" : "silence";
    return end(speech_ended_at_, c, std::move(ev), emit);
  }
  if (settings_.eager_eot_threshold && state_ == State::kOngoing && !words_.empty() &&
      c >= *settings_.eager_eot_threshold) {
    ev.reason = ev.semantic >= 0 ? "semantic" : "silence";
    state_ = State::kLikelyOver;
    emit(events::TurnEndLikely{turn_, speech_ended_at_, c, std::move(ev)});
  }
}

}  // namespace earshot::stages::turns

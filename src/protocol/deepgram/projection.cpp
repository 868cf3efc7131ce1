#include "protocol/deepgram/projection.h"

#include <algorithm>
#include <type_traits>

namespace earshot::deepgram {

namespace {

bool same_words(const std::vector<Word>& a, const std::vector<Word>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Word& x, const Word& y) {
    return x.text == y.text && x.start == y.start && x.end == y.end;
  });
}

}  // namespace

void Projection::emit_final(std::vector<nlohmann::json>& out, bool speech_final, bool from_finalize, double end_hint) {
  Results r;
  r.is_final = true;
  r.speech_final = speech_final;
  r.from_finalize = from_finalize;
  r.channel = channel_;
  r.start = final_until_;
  double end = std::max(final_until_, end_hint);
  if (!pending_.empty()) end = std::max(end, pending_.back().end);
  r.duration = end - r.start;
  r.words = std::move(pending_);
  pending_.clear();
  // Windows tile the audio and never reopen: a word the session commits late for audio
  // already declared final (an endpoint passed while it was still provisional) is
  // clamped to the window's start rather than reaching back into a sent window.
  for (Word& w : r.words) {
    w.start = std::max(w.start, r.start);
    w.end = std::max(w.end, w.start);
  }
  if (!r.words.empty()) anchor_ = r.words.back().end;
  final_until_ = end;
  out.push_back(results_message(r, options_, info_));
  // The interim this final supersedes is gone; a new tail will be sent even if it repeats.
  last_interim_.clear();
}

void Projection::check_utterance_end(std::vector<nlohmann::json>& out, double clock) {
  if (!options_.utterance_end_ms || !anchor_) return;
  // The gap runs from the last finalized word to the next word heard (interim or not yet sent), or to now.
  double gap_end = clock;
  if (!pending_.empty())
    gap_end = pending_.front().start;
  else if (!provisional_.empty())
    gap_end = provisional_.front().start;
  if (gap_end - *anchor_ >= *options_.utterance_end_ms / 1000.0) {
    out.push_back(utterance_end_message(*anchor_, channel_, info_.channels));
    anchor_.reset();
  }
}

bool Projection::endpoint_due(double clock) const {
  return endpoint_at_ && clock >= *endpoint_at_ + *options_.endpointing_ms / 1000.0;
}

std::vector<nlohmann::json> Projection::on_events(std::span<const events::Event> events, double heard_seconds) {
  std::vector<nlohmann::json> out;
  bool end_of_stream = false;
  // Diarized words become finals once their speakers are named (SpeakerGate); they
  // show in the interim meanwhile.
  std::vector<events::Event> passed;
  for (const events::Event& event : events)
    for (events::Event& e : gate_.pass(event)) passed.push_back(std::move(e));
  for (const events::Event& event : passed) {
    if (ended_) break;
    if (auto* e = std::get_if<events::WordsCommitted>(&event)) {
      if (e->words.empty()) continue;
      // Events can arrive in batches covering seconds of audio: gaps are judged on
      // the audio clock, here the start of the next word.
      const double next = e->words.front().start;
      if (options_.utterance_end_ms && !pending_.empty() &&
          next - pending_.back().end >= *options_.utterance_end_ms / 1000.0 && !endpoint_at_)
        emit_final(out, false, false, 0);
      check_utterance_end(out, next);
      std::vector<Word> words = e->words;
      number_speakers_from_zero(words);
      pending_.insert(pending_.end(), words.begin(), words.end());
    } else if (auto* e = std::get_if<events::ProvisionalChanged>(&event)) {
      provisional_ = e->words;
      number_speakers_from_zero(provisional_);
    } else if (auto* e = std::get_if<events::SpeechStarted>(&event)) {
      // Speech resumed: the pause before it was an endpoint if it lasted `endpointing` ms.
      if (endpoint_at_ && e->at >= *endpoint_at_ + *options_.endpointing_ms / 1000.0)
        emit_final(out, true, false, *endpoint_at_);
      endpoint_at_.reset();
      if (options_.vad_events) out.push_back(speech_started_message(e->at, channel_));
    } else if (auto* e = std::get_if<events::SpeechEnded>(&event)) {
      if (options_.endpointing_ms) endpoint_at_ = e->at;
    } else if (auto* e = std::get_if<events::AudioSkipped>(&event)) {
      // The words before the skip are final now (a pending endpoint ends its turn); no
      // window covers the skipped time: the next one starts after it.
      if (endpoint_at_)
        emit_final(out, true, false, *endpoint_at_);
      else if (!pending_.empty())
        emit_final(out, false, false, 0);
      endpoint_at_.reset();
      final_until_ = std::max(final_until_, e->end);
      out.push_back(audio_skipped_message(e->start, e->end));
    } else if (auto* e = std::get_if<events::Finalized>(&event)) {
      finalize(out, e->at, heard_seconds);
    } else if (auto* e = std::get_if<events::StreamError>(&event)) {
      out.push_back(error_message(e->message));
      ended_ = true;
    } else if (std::holds_alternative<events::EndOfStream>(event)) {
      end_of_stream = true;
    }
  }
  if (ended_) return out;
  if (endpoint_at_ && (end_of_stream || endpoint_due(heard_seconds))) {
    emit_final(out, true, false, *endpoint_at_);
    endpoint_at_.reset();
  } else if (!pending_.empty() && (!endpoint_at_ || end_of_stream)) {
    emit_final(out, false, false, 0);
  }
  if (end_of_stream && !pending_.empty()) emit_final(out, false, false, 0);
  // The interim: what the client has not had as final yet, committed words held for
  // an endpoint included (the final that follows repeats them, as Deepgram's does).
  std::vector<Word> tail = pending_;
  std::vector<Word> held = gate_.held_words();
  number_speakers_from_zero(held);
  tail.insert(tail.end(), held.begin(), held.end());
  tail.insert(tail.end(), provisional_.begin(), provisional_.end());
  if (options_.interim_results && !tail.empty() && !same_words(tail, last_interim_)) {
    Results r;
    r.channel = channel_;
    r.start = final_until_;
    r.duration = std::max(0.0, tail.back().end - final_until_);
    r.words = tail;
    out.push_back(results_message(r, options_, info_));
    last_interim_ = std::move(tail);
  }
  check_utterance_end(out, heard_seconds);
  if (end_of_stream) ended_ = true;
  return out;
}

std::vector<nlohmann::json> Projection::force_final() {
  std::vector<nlohmann::json> out;
  if (ended_) return out;
  std::vector<Word> held = gate_.held_words();
  number_speakers_from_zero(held);
  pending_.insert(pending_.end(), held.begin(), held.end());
  pending_.insert(pending_.end(), provisional_.begin(), provisional_.end());
  provisional_.clear();
  endpoint_at_.reset();
  if (!pending_.empty()) emit_final(out, true, false, 0);
  ended_ = true;
  return out;
}

void Projection::finalize(std::vector<nlohmann::json>& out, double at, double clock) {
  // A pending endpoint is not the client's to cancel: the flush's final ends the turn
  // when its silence has passed already, else the endpoint's own final will (empty
  // when the flush took every word), so a client that sends Finalize as speech ends
  // still gets its speech_final.
  const bool ends_turn = endpoint_due(clock);
  emit_final(out, ends_turn, true, at);
  if (ends_turn) endpoint_at_.reset();
}

std::vector<nlohmann::json> Projection::on_finalized(double at, double heard_seconds) {
  std::vector<nlohmann::json> out;
  if (ended_) return out;
  finalize(out, at, heard_seconds);
  return out;
}

}  // namespace earshot::deepgram

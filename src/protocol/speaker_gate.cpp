#include "protocol/speaker_gate.h"

namespace earshot::protocol {

std::vector<events::Event> SpeakerGate::pass(const events::Event& event) {
  std::vector<events::Event> out;
  if (const auto* assigned = std::get_if<events::SpeakersAssigned>(&event)) {
    for (size_t i = 0; i < assigned->speakers.size(); ++i) assigned_[assigned->first_word + i] = assigned->speakers[i];
    release(out, false);
    return out;
  }
  if (std::holds_alternative<events::ProvisionalChanged>(event) ||
      std::holds_alternative<events::TranslationDraftChanged>(event)) {
    out.push_back(event);
    return out;
  }
  const auto* committed = std::get_if<events::WordsCommitted>(&event);
  const uint64_t first = next_word_;
  if (committed) next_word_ += committed->words.size();
  if (held_.empty() && !(committed && committed->speakers_pending)) {
    out.push_back(event);
    return out;
  }
  held_.push_back({event, first});
  const bool end =
      std::holds_alternative<events::EndOfStream>(event) || std::holds_alternative<events::StreamError>(event);
  release(out, end);
  return out;
}

void SpeakerGate::release(std::vector<events::Event>& out, bool all) {
  while (!held_.empty()) {
    Held& h = held_.front();
    if (auto* committed = std::get_if<events::WordsCommitted>(&h.event); committed && committed->speakers_pending) {
      bool complete = true;
      for (uint64_t i = 0; i < committed->words.size() && complete; ++i)
        complete = assigned_.count(h.first_word + i) > 0;
      if (!complete && !all) return;
      for (uint64_t i = 0; i < committed->words.size(); ++i) {
        const auto it = assigned_.find(h.first_word + i);
        if (it == assigned_.end()) continue;
        committed->words[i].speaker = it->second;
        assigned_.erase(it);
      }
      committed->speakers_pending = false;
    }
    out.push_back(std::move(h.event));
    held_.pop_front();
  }
}

std::vector<Word> SpeakerGate::held_words() const {
  std::vector<Word> words;
  for (const Held& h : held_) {
    const auto* committed = std::get_if<events::WordsCommitted>(&h.event);
    if (!committed) continue;
    for (size_t i = 0; i < committed->words.size(); ++i) {
      Word w = committed->words[i];
      if (const auto it = assigned_.find(h.first_word + i); it != assigned_.end()) w.speaker = it->second;
      words.push_back(std::move(w));
    }
  }
  return words;
}

}  // namespace earshot::protocol

#include "protocol/openai_realtime/projection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "common/text.h"
#include "common/utf8.h"

namespace earshot::openai_realtime {

namespace {

using json = nlohmann::json;

long ms(double seconds) { return std::lround(std::max(0.0, seconds) * 1000.0); }

// A word's log-probability as LogProbProperties: the word, its bytes, log p (0 when the model gave none).
json logprob(const Word& w) {
  const std::string text = to_valid_utf8(w.text);
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(c);
  return {{"token", text},
          {"logprob", w.probability > 0 ? std::log(static_cast<double>(w.probability)) : 0.0},
          {"bytes", bytes}};
}

bool ends_sentence(const std::vector<Word>& words) {
  for (auto it = words.rbegin(); it != words.rend(); ++it) {
    const std::string t = trim(it->text);
    if (t.empty()) continue;
    for (const char* end : {".", "?", "!", "\xE3\x80\x82", "\xEF\xBC\x9F", "\xEF\xBC\x81"})
      if (t.size() >= std::char_traits<char>::length(end) &&
          t.compare(t.size() - std::char_traits<char>::length(end), std::string::npos, end) == 0)
        return true;
    return false;
  }
  return false;
}

}  // namespace

void Projection::configure(const SessionConfig& config) {
  turn_ = config.turn;
  logprobs_ = config.logprobs;
  if (turn_.type == TurnType::kNone) endpoint_.reset();
}

Projection::Item& Projection::open_item() {
  if (!open_) {
    open_.emplace();
    open_->id = ids_.item();
  }
  return *open_;
}

double Projection::silence_seconds() const {
  if (turn_.type == TurnType::kServerVad) return turn_.silence_duration_ms / 1000.0;
  // semantic_vad without a turn stage: a sentence's end ends the turn after a short
  // pause, anything else after the eagerness' longest (OpenAI's 2, 4 and 8 s).
  const bool complete = open_ && ends_sentence(open_->words);
  if (turn_.eagerness == "high") return complete ? 0.5 : 2.0;
  if (turn_.eagerness == "low") return complete ? 2.0 : 8.0;
  return complete ? 1.0 : 4.0;
}

void Projection::deliver(Item& item, std::vector<json>& out) {
  if (!options_.live_deltas && !item.committed) return;
  if (item.delivered == item.words.size()) return;
  std::string text;
  json probs = json::array();
  for (size_t i = item.delivered; i < item.words.size(); ++i) {
    text += item.words[i].text;
    if (logprobs_) probs.push_back(logprob(item.words[i]));
  }
  if (item.delivered == 0) text = trim(text, " \t\r\n").empty() ? "" : text.substr(text.find_first_not_of(" \t\r\n"));
  item.delivered = item.words.size();
  if (text.empty()) return;
  json delta = {{"type", "conversation.item.input_audio_transcription.delta"},
                {"event_id", ids_.event()},
                {"item_id", item.id},
                {"content_index", 0},
                {"delta", to_valid_utf8(text)}};
  if (logprobs_) delta["logprobs"] = probs;
  out.push_back(std::move(delta));
}

void Projection::add_words(const std::vector<Word>& words, std::vector<json>& out) {
  std::vector<Item*> touched;
  for (const Word& w : words) {
    Item* target = nullptr;
    bool dropped = false;
    for (const Flush& f : flushes_) {
      if (w.start >= f.until) continue;
      if (f.clear) {
        dropped = true;
      } else {
        for (Item& a : awaiting_)
          if (a.id == f.item) target = &a;
      }
      break;
    }
    if (dropped) continue;
    if (!target) target = &open_item();
    if (target->start < 0) target->start = w.start;
    target->words.push_back(w);
    if (std::find(touched.begin(), touched.end(), target) == touched.end()) touched.push_back(target);
  }
  for (Item* item : touched) deliver(*item, out);
}

void Projection::speech_started(double at, std::vector<json>& out) {
  Item& item = open_item();
  if (item.spoken) return;
  item.spoken = true;
  if (item.start < 0 || at < item.start) item.start = at;
  out.push_back({{"type", "input_audio_buffer.speech_started"},
                 {"event_id", ids_.event()},
                 {"audio_start_ms", std::max(0L, ms(at) - turn_.prefix_padding_ms)},
                 {"item_id", item.id}});
}

void Projection::commit_events(Item& item, std::vector<json>& out) {
  const json previous = previous_item_.empty() ? json(nullptr) : json(previous_item_);
  out.push_back({{"type", "input_audio_buffer.committed"},
                 {"event_id", ids_.event()},
                 {"previous_item_id", previous},
                 {"item_id", item.id}});
  out.push_back({{"type", "conversation.item.created"},
                 {"event_id", ids_.event()},
                 {"previous_item_id", previous},
                 {"item",
                  {{"id", item.id},
                   {"object", "realtime.item"},
                   {"type", "message"},
                   {"status", "completed"},
                   {"role", "user"},
                   {"content", json::array({{{"type", "input_audio"}, {"transcript", nullptr}}})}}}});
  previous_item_ = item.id;
  item.committed = true;
  deliver(item, out);
}

void Projection::complete(Item& item, std::vector<json>& out) {
  deliver(item, out);
  std::string transcript;
  json probs = json::array();
  for (const Word& w : item.words) {
    transcript += w.text;
    if (logprobs_) probs.push_back(logprob(w));
  }
  const double start = item.start < 0 ? 0 : item.start;
  const double end = item.words.empty() ? start : std::max(start, item.words.back().end);
  json completed = {{"type", "conversation.item.input_audio_transcription.completed"},
                    {"event_id", ids_.event()},
                    {"item_id", item.id},
                    {"content_index", 0},
                    {"transcript", to_valid_utf8(trim(transcript, " \t\r\n"))},
                    {"usage", {{"type", "duration"}, {"seconds", std::round((end - start) * 1000.0) / 1000.0}}}};
  if (logprobs_) completed["logprobs"] = probs;
  out.push_back(std::move(completed));
}

void Projection::end_item(std::optional<double> stopped_at, bool await_flush, std::vector<json>& out) {
  Item item = open_ ? std::move(*open_) : Item{};
  if (!open_) item.id = ids_.item();
  open_.reset();
  endpoint_.reset();
  if (stopped_at && item.spoken)
    out.push_back({{"type", "input_audio_buffer.speech_stopped"},
                   {"event_id", ids_.event()},
                   {"audio_end_ms", ms(*stopped_at)},
                   {"item_id", item.id}});
  commit_events(item, out);
  if (await_flush)
    awaiting_.push_back(std::move(item));
  else
    complete(item, out);
}

void Projection::flushed(uint64_t answered, std::vector<json>& out) {
  while (!flushes_.empty() && flushes_.front().request <= answered) {
    const Flush f = flushes_.front();
    flushes_.pop_front();
    if (f.clear) continue;
    const auto it = std::find_if(awaiting_.begin(), awaiting_.end(), [&](const Item& i) { return i.id == f.item; });
    if (it == awaiting_.end()) continue;
    complete(*it, out);
    awaiting_.erase(it);
  }
}

void Projection::check_endpoint(double clock, bool end_of_stream, std::vector<json>& out) {
  if (!endpoint_ || !open_) return;
  const double end = *endpoint_ + silence_seconds();
  if (end_of_stream || clock >= end) end_item(std::min(end, std::max(clock, *endpoint_)), false, out);
}

std::vector<json> Projection::on_events(std::span<const events::Event> events, double heard_seconds) {
  std::vector<json> out;
  bool end_of_stream = false;
  const bool vad = turn_.type != TurnType::kNone;
  const bool fallback = vad && !options_.turn_events;
  for (const events::Event& event : events) {
    if (ended_) break;
    if (auto* e = std::get_if<events::WordsCommitted>(&event)) {
      add_words(e->words, out);
    } else if (auto* e = std::get_if<events::SpeechStarted>(&event)) {
      if (!fallback) continue;
      // Speech resumed: the pause before it ended the item if it lasted the silence.
      if (endpoint_) check_endpoint(e->at, false, out);
      endpoint_.reset();
      speech_started(e->at, out);
    } else if (auto* e = std::get_if<events::SpeechEnded>(&event)) {
      if (fallback && open_) endpoint_ = e->at;
    } else if (auto* e = std::get_if<events::TurnStarted>(&event)) {
      if (vad && options_.turn_events) speech_started(e->at, out);
    } else if (auto* e = std::get_if<events::TurnEnded>(&event)) {
      if (vad && options_.turn_events && open_) end_item(e->at, false, out);
    } else if (auto* e = std::get_if<events::Finalized>(&event)) {
      flushed(e->requests, out);
    } else if (auto* e = std::get_if<events::AudioSkipped>(&event)) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "audio from %.2f s to %.2f s was skipped: the server fell too far behind the stream (send "
                    "audio no faster than real time, or use a less loaded server)",
                    e->start, e->end);
      out.push_back(error_event(ids_, "server_error", "audio_skipped", text));
    } else if (auto* e = std::get_if<events::StreamError>(&event)) {
      out.push_back(error_event(ids_, "server_error", "transcription_failed", e->message));
      auto failed = [&](const Item& item) {
        out.push_back({{"type", "conversation.item.input_audio_transcription.failed"},
                       {"event_id", ids_.event()},
                       {"item_id", item.id},
                       {"content_index", 0},
                       {"error", {{"type", "server_error"}, {"message", to_valid_utf8(e->message)}}}});
      };
      for (const Item& item : awaiting_) failed(item);
      if (open_ && (open_->spoken || open_->delivered > 0)) failed(*open_);
      ended_ = true;
    } else if (std::holds_alternative<events::EndOfStream>(event)) {
      end_of_stream = true;
    }
  }
  if (ended_) return out;
  check_endpoint(heard_seconds, end_of_stream, out);
  if (end_of_stream) {
    flushed(UINT64_MAX, out);
    if (open_ && (open_->spoken || !open_->words.empty()))
      end_item(open_->spoken ? std::optional<double>(heard_seconds) : std::nullopt, false, out);
    ended_ = true;
  }
  return out;
}

std::vector<json> Projection::commit(double until, uint64_t request) {
  std::vector<json> out;
  if (ended_) return out;
  end_item(std::nullopt, true, out);
  flushes_.push_back({false, until, request, awaiting_.back().id});
  return out;
}

std::vector<json> Projection::clear(double until, uint64_t request) {
  std::vector<json> out;
  out.push_back({{"type", "input_audio_buffer.cleared"}, {"event_id", ids_.event()}});
  if (ended_) return out;
  open_.reset();  // its words so far are dropped; it was never created
  endpoint_.reset();
  flushes_.push_back({true, until, request, ""});
  return out;
}

std::vector<json> Projection::force_final() {
  std::vector<json> out;
  if (ended_) return out;
  flushed(UINT64_MAX, out);
  if (open_ && (open_->spoken || !open_->words.empty())) end_item(std::nullopt, false, out);
  ended_ = true;
  return out;
}

}  // namespace earshot::openai_realtime

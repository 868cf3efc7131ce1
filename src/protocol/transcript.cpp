#include "protocol/transcript.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/text.h"
#include "protocol/rttm.h"

namespace earshot::protocol {

namespace {

std::string clock_time(double seconds, char separator) {
  long long millis = std::llround(std::max(0.0, seconds) * 1000.0);
  char text[48];
  std::snprintf(text, sizeof text, "%02lld:%02lld:%02lld%c%03lld", millis / 3600000, millis / 60000 % 60,
                millis / 1000 % 60, separator, millis % 1000);
  return text;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

double round_ms(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }

// "end.", "end?\"" and "end!) " end a sentence.
bool ends_sentence(const std::string& text) {
  const size_t last = text.find_last_not_of(" \t\r\n\"')]");
  return last != std::string::npos && (text[last] == '.' || text[last] == '?' || text[last] == '!');
}

}  // namespace

std::vector<Segment> segments(const std::vector<Word>& words, const SegmentRule& rule) {
  std::vector<Segment> out;
  bool open = false;
  int speaker = 0;
  double last_end = 0;
  for (const Word& w : words) {
    if (open) {
      const bool new_speaker = (w.speaker > 0 ? w.speaker : 1) != speaker;
      const bool paused = w.start - last_end >= rule.pause_seconds;
      const bool too_long = std::max(out.back().end, w.end) - out.back().start > rule.max_seconds;
      if (new_speaker || paused || too_long) open = false;
    }
    if (!open) {
      out.push_back(Segment{w.start, w.end, "", w.speaker > 0 ? w.speaker : -1});
      speaker = w.speaker > 0 ? w.speaker : 1;
      open = true;
    }
    Segment& s = out.back();
    s.text += w.text;
    s.end = std::max(s.end, w.end);
    last_end = w.end;
    if (ends_sentence(w.text)) open = false;
  }
  return out;
}

std::vector<Word> committed_words(const std::vector<events::Event>& log) {
  std::vector<Word> words;
  for (const events::Event& e : log) {
    if (const auto* committed = std::get_if<events::WordsCommitted>(&e)) {
      words.insert(words.end(), committed->words.begin(), committed->words.end());
    } else if (const auto* assigned = std::get_if<events::SpeakersAssigned>(&e)) {
      for (size_t i = 0; i < assigned->speakers.size(); ++i)
        if (assigned->first_word + i < words.size()) words[assigned->first_word + i].speaker = assigned->speakers[i];
    }
  }
  return words;
}

std::string transcript_text(const std::vector<Word>& words) {
  std::string text;
  for (const Word& w : words) text += w.text;
  return trim(text);
}

std::string transcript_turns(const std::vector<Word>& words) {
  if (std::none_of(words.begin(), words.end(), [](const Word& w) { return w.speaker > 0; }))
    return transcript_text(words);
  std::string text;
  int speaker = 0;
  std::string turn;
  for (const Word& w : words) {
    if (w.speaker > 0 && w.speaker != speaker) {
      if (!trim(turn).empty()) text += (text.empty() ? "" : "\n") + trim(turn);
      turn = "[S" + std::to_string(w.speaker) + "] ";
      speaker = w.speaker;
      const size_t first = w.text.find_first_not_of(" \t");
      turn += first == std::string::npos ? "" : w.text.substr(first);
      continue;
    }
    turn += w.text;
  }
  if (!trim(turn).empty()) text += (text.empty() ? "" : "\n") + trim(turn);
  return text;
}

std::string format_srt(const std::vector<Segment>& segments) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string voice = segments[i].speaker > 0 ? "[S" + std::to_string(segments[i].speaker) + "] " : "";
    out += std::to_string(i + 1) + "\n" + clock_time(segments[i].start, ',') + " --> " +
           clock_time(segments[i].end, ',') + "\n" + voice + trim(segments[i].text) + "\n\n";
  }
  return out;
}

std::string format_vtt(const std::vector<Segment>& segments) {
  std::string out = "WEBVTT\n\n";
  for (const Segment& s : segments) {
    const std::string voice = s.speaker > 0 ? "<v Speaker " + std::to_string(s.speaker) + ">" : "";
    out += clock_time(s.start, '.') + " --> " + clock_time(s.end, '.') + "\n" + voice + trim(s.text) + "\n\n";
  }
  return out;
}

std::string words_json(const std::vector<Word>& words) {
  std::string out = "[";
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += ",";
    out += "{\"text\":" + json_quote(words[i].text) + ",\"start\":" + number(words[i].start) +
           ",\"end\":" + number(words[i].end);
    if (words[i].speaker > 0) out += ",\"speaker\":" + std::to_string(words[i].speaker);
    out += "}";
  }
  return out + "]";
}

std::string transcript_json(const std::vector<Word>& words, const std::string& language, const std::string& file_name) {
  return "{\"file\":" + json_quote(file_name) + ",\"language\":" + json_quote(language) +
         ",\"text\":" + json_quote(transcript_text(words)) + ",\"words\":" + words_json(words) + "}\n";
}

std::string format_rttm(const std::vector<Segment>& segments, const std::string& file_id) {
  std::vector<RttmSegment> turns;
  for (const Segment& s : segments)
    if (s.speaker > 0)
      turns.push_back({file_id, "1", s.start, std::max(0.0, s.end - s.start), "S" + std::to_string(s.speaker)});
  return format_rttm(turns, kRttmMilliseconds);
}

std::string openai_json(const std::vector<Word>& words, const std::vector<Segment>& segments, double duration_seconds,
                        const std::string& language, bool verbose) {
  nlohmann::json j = {{"text", transcript_text(words)},
                      {"usage", {{"type", "duration"}, {"seconds", static_cast<int>(std::ceil(duration_seconds))}}}};
  if (verbose) {
    nlohmann::json word_list = nlohmann::json::array(), segment_list = nlohmann::json::array();
    for (const Word& w : words)
      word_list.push_back({{"word", trim(w.text)}, {"start", round_ms(w.start)}, {"end", round_ms(w.end)}});
    for (size_t i = 0; i < segments.size(); ++i) {
      segment_list.push_back({{"id", i},
                              {"start", round_ms(segments[i].start)},
                              {"end", round_ms(segments[i].end)},
                              {"text", segments[i].text}});
      if (segments[i].speaker > 0) segment_list.back()["speaker"] = segments[i].speaker;
    }
    j["task"] = "transcribe";
    j["language"] = language;
    j["duration"] = round_ms(duration_seconds);
    j["words"] = std::move(word_list);
    j["segments"] = std::move(segment_list);
  }
  return j.dump();
}

std::string openai_diarized_json(const std::vector<Word>& words, const std::vector<Segment>& segments,
                                 double duration_seconds) {
  nlohmann::json segment_list = nlohmann::json::array();
  for (size_t i = 0; i < segments.size(); ++i) {
    const int speaker = segments[i].speaker;
    // Speakers 1..26 are A..Z; beyond (never with a 4-speaker model) their number.
    const std::string label = speaker <= 0    ? ""
                              : speaker <= 26 ? std::string(1, static_cast<char>('A' + speaker - 1))
                                              : std::to_string(speaker);
    segment_list.push_back({{"type", "transcript.text.segment"},
                            {"id", "seg_" + std::to_string(i)},
                            {"start", round_ms(segments[i].start)},
                            {"end", round_ms(segments[i].end)},
                            {"text", segments[i].text},
                            {"speaker", label}});
  }
  const nlohmann::json j = {
      {"task", "transcribe"},
      {"duration", round_ms(duration_seconds)},
      {"text", transcript_text(words)},
      {"segments", std::move(segment_list)},
      {"usage", {{"type", "duration"}, {"seconds", static_cast<int>(std::ceil(duration_seconds))}}}};
  return j.dump();
}

}  // namespace earshot::protocol

#include "protocol/transcript.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace earshot::protocol {

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  size_t b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

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
      out.push_back(Segment{w.start, w.end, ""});
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

std::string transcript_text(const std::vector<Word>& words) {
  std::string text;
  for (const Word& w : words) text += w.text;
  return trim(text);
}

std::string format_srt(const std::vector<Segment>& segments) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    out += std::to_string(i + 1) + "\n" + clock_time(segments[i].start, ',') + " --> " +
           clock_time(segments[i].end, ',') + "\n" + trim(segments[i].text) + "\n\n";
  }
  return out;
}

std::string format_vtt(const std::vector<Segment>& segments) {
  std::string out = "WEBVTT\n\n";
  for (const Segment& s : segments)
    out += clock_time(s.start, '.') + " --> " + clock_time(s.end, '.') + "\n" + trim(s.text) + "\n\n";
  return out;
}

std::string words_json(const std::vector<Word>& words) {
  std::string out = "[";
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += ",";
    out += "{\"text\":" + json_quote(words[i].text) + ",\"start\":" + number(words[i].start) +
           ",\"end\":" + number(words[i].end) + "}";
  }
  return out + "]";
}

std::string transcript_json(const std::vector<Word>& words, const std::string& language, const std::string& file_name) {
  return "{\"file\":" + json_quote(file_name) + ",\"language\":" + json_quote(language) +
         ",\"text\":" + json_quote(transcript_text(words)) + ",\"words\":" + words_json(words) + "}\n";
}

std::string openai_json(const std::vector<Word>& words, const std::vector<Segment>& segments, double duration_seconds,
                        const std::string& language, bool verbose) {
  nlohmann::json j = {{"text", transcript_text(words)},
                      {"usage", {{"type", "duration"}, {"seconds", static_cast<int>(std::ceil(duration_seconds))}}}};
  if (verbose) {
    nlohmann::json word_list = nlohmann::json::array(), segment_list = nlohmann::json::array();
    for (const Word& w : words)
      word_list.push_back({{"word", trim(w.text)}, {"start", round_ms(w.start)}, {"end", round_ms(w.end)}});
    for (size_t i = 0; i < segments.size(); ++i)
      segment_list.push_back({{"id", i},
                              {"start", round_ms(segments[i].start)},
                              {"end", round_ms(segments[i].end)},
                              {"text", segments[i].text}});
    j["task"] = "transcribe";
    j["language"] = language;
    j["duration"] = round_ms(duration_seconds);
    j["words"] = std::move(word_list);
    j["segments"] = std::move(segment_list);
  }
  return j.dump();
}

}  // namespace earshot::protocol

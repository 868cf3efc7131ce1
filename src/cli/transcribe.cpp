#include "cli/transcribe.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "common/error.h"
#include "common/json_text.h"

namespace earshot::cli {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
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

std::string clock(double seconds, char decimal_mark) {
  const auto ms = static_cast<long long>(std::llround(std::max(0.0, seconds) * 1000));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
                decimal_mark, ms % 1000);
  return buf;
}

// Subtitle cues: a sentence end, 42 characters or 7 seconds close a cue.
std::vector<std::vector<Word>> cues(const std::vector<Word>& words) {
  std::vector<std::vector<Word>> out;
  std::vector<Word> cue;
  size_t chars = 0;
  for (const Word& w : words) {
    if (!cue.empty() && (chars + w.text.size() > 42 || w.end - cue.front().start > 7.0)) {
      out.push_back(std::move(cue));
      cue.clear();
      chars = 0;
    }
    cue.push_back(w);
    chars += w.text.size();
    const char last = w.text.empty() ? ' ' : w.text.back();
    if (last == '.' || last == '?' || last == '!') {
      out.push_back(std::move(cue));
      cue.clear();
      chars = 0;
    }
  }
  if (!cue.empty()) out.push_back(std::move(cue));
  return out;
}

}  // namespace

Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission) {
  if (!(options.chunk_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--chunk must be > 0 seconds, got " + std::to_string(options.chunk_seconds));
  }
  Transcript t;
  const auto chunk = std::max<size_t>(1, static_cast<size_t>(options.chunk_seconds * 16000));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto emit = [&](std::vector<Word> committed, double audio_time) {
    Emission e;
    e.emission_time = elapsed();
    e.audio_time = audio_time;
    e.committed = std::move(committed);
    e.provisional = processor.provisional();
    t.words.insert(t.words.end(), e.committed.begin(), e.committed.end());
    if (on_emission) on_emission(e);
    t.emissions.push_back(std::move(e));
  };
  for (size_t at = 0; at < pcm.size(); at += chunk) {
    const size_t n = std::min(chunk, pcm.size() - at);
    const double audio_time = static_cast<double>(at + n) / 16000;
    if (options.realtime) {
      // Audio arrives no faster than it is spoken.
      std::this_thread::sleep_until(start + std::chrono::duration<double>(audio_time));
    }
    processor.insert_audio(std::span<const float>(pcm.data() + at, n), audio_time);
    emit(processor.process().committed, audio_time);
  }
  emit(processor.finish().committed, static_cast<double>(pcm.size()) / 16000);
  t.language = processor.language();
  return t;
}

std::string words_text(const std::vector<Word>& words) {
  std::string text;
  for (const Word& w : words) text += w.text;
  const size_t b = text.find_first_not_of(' ');
  return b == std::string::npos ? "" : text.substr(b);
}

std::string emission_json(const Emission& e) {
  return "{\"emission_time\":" + number(e.emission_time) + ",\"audio_time\":" + number(e.audio_time) +
         ",\"committed\":" + words_json(e.committed) + ",\"provisional\":" + json_quote(words_text(e.provisional)) +
         "}";
}

std::string format_transcript(const Transcript& t, const std::string& format, const std::string& file_name) {
  if (format == "txt") return words_text(t.words) + "\n";
  if (format == "json") {
    return "{\"file\":" + json_quote(file_name) + ",\"language\":" + json_quote(t.language) +
           ",\"text\":" + json_quote(words_text(t.words)) + ",\"words\":" + words_json(t.words) + "}\n";
  }
  if (format == "srt" || format == "vtt") {
    const bool srt = format == "srt";
    std::string out = srt ? "" : "WEBVTT\n\n";
    int index = 1;
    for (const auto& cue : cues(t.words)) {
      if (srt) out += std::to_string(index++) + "\n";
      out += clock(cue.front().start, srt ? ',' : '.') + " --> " + clock(cue.back().end, srt ? ',' : '.') + "\n";
      out += words_text(cue) + "\n\n";
    }
    return out;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown --format '" + format + "' (use txt, json, srt or vtt)");
}

}  // namespace earshot::cli

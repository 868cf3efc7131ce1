#include "cli/transcribe.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "common/error.h"
#include "common/json_text.h"
#include "protocol/transcript.h"

namespace earshot::cli {

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
  char times[96];
  std::snprintf(times, sizeof times, "{\"emission_time\":%.3f,\"audio_time\":%.3f", e.emission_time, e.audio_time);
  return times + std::string(",\"committed\":") + protocol::words_json(e.committed) +
         ",\"provisional\":" + json_quote(words_text(e.provisional)) + "}";
}

std::string format_transcript(const Transcript& t, const std::string& format, const std::string& file_name) {
  if (format == "txt") return protocol::transcript_text(t.words) + "\n";
  if (format == "json") return protocol::transcript_json(t.words, t.language, file_name);
  // The CLI has no session (no pauses from a VAD): the rule's word-gap threshold
  // is the session's default pause length.
  if (format == "srt") return protocol::format_srt(protocol::segments(t.words));
  if (format == "vtt") return protocol::format_vtt(protocol::segments(t.words));
  throw Error(ErrorCode::kInvalidArgument, "unknown --format '" + format + "' (use txt, json, srt or vtt)");
}

}  // namespace earshot::cli

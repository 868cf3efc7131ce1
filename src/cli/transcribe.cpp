#include "cli/transcribe.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/json_text.h"
#include "common/sample_rate.h"
#include "protocol/transcript.h"

namespace earshot::cli {

namespace {

// What the stages said about one emission: the translation's text and finals,
// the speakers of committed words.
void collect(const events::Event& out, Emission& e, Transcript& t) {
  if (const auto* c = std::get_if<events::TranslationCommitted>(&out)) {
    e.translation_committed += c->text;
  } else if (const auto* d = std::get_if<events::TranslationDraftChanged>(&out)) {
    e.translation_draft = d->text;
  } else if (const auto* f = std::get_if<events::SegmentTranslated>(&out)) {
    t.translations.push_back({f->start, f->end, f->source, f->translation});
  } else if (const auto* s = std::get_if<events::SpeakersAssigned>(&out)) {
    for (size_t i = 0; i < s->speakers.size(); ++i)
      if (s->first_word + i < t.words.size()) t.words[s->first_word + i].speaker = s->speakers[i];
  } else if (const auto* p = std::get_if<events::ProvisionalChanged>(&out)) {
    e.provisional = p->words;  // with the speakers a stage gave them
  }
}

// Runs `event` through the stages in order.
std::vector<events::Event> run_chain(const std::vector<stages::Stage*>& stages, events::Event event) {
  std::vector<events::Event> current{std::move(event)};
  for (stages::Stage* stage : stages) {
    std::vector<events::Event> next;
    for (const events::Event& e : current)
      stage->consume(e, [&next](events::Event out) { next.push_back(std::move(out)); });
    current = std::move(next);
  }
  return current;
}

}  // namespace

Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission, stages::Stage* translation) {
  std::vector<stages::Stage*> stages;
  if (translation) stages.push_back(translation);
  return transcribe(processor, pcm, options, on_emission, stages, translation != nullptr);
}

Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission,
                      const std::vector<stages::Stage*>& stages, bool translating) {
  if (!(options.chunk_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--chunk must be > 0 seconds, got " + std::to_string(options.chunk_seconds));
  }
  Transcript t;
  // Synchronous stages answer in consume(); anything posted joins the next emission.
  std::mutex posted_mutex;
  std::vector<events::Event> posted;
  for (size_t i = 0; i < stages.size(); ++i)
    stages[i]->attach([&, i](std::vector<events::Event> events) {
      const std::vector<stages::Stage*> rest(stages.begin() + static_cast<std::ptrdiff_t>(i) + 1, stages.end());
      std::vector<events::Event> out;
      for (events::Event& e : events) {
        std::vector<events::Event> staged = run_chain(rest, std::move(e));
        out.insert(out.end(), staged.begin(), staged.end());
      }
      std::lock_guard lock(posted_mutex);
      posted.insert(posted.end(), out.begin(), out.end());
    });
  auto run = [&](events::Event event, Emission& e) {
    for (const events::Event& out : run_chain(stages, std::move(event))) collect(out, e, t);
    std::vector<events::Event> late;
    {
      std::lock_guard lock(posted_mutex);
      late.swap(posted);
    }
    for (const events::Event& out : late) collect(out, e, t);
  };
  const auto chunk = std::max<size_t>(1, static_cast<size_t>(options.chunk_seconds * kSampleRate));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto emit = [&](std::vector<Word> committed, double audio_time) {
    Emission e;
    e.emission_time = elapsed();
    e.audio_time = audio_time;
    e.committed = std::move(committed);
    e.provisional = processor.provisional();
    t.words.insert(t.words.end(), e.committed.begin(), e.committed.end());
    e.translating = translating;
    if (!stages.empty()) {
      std::vector<Word> filled = e.committed;
      for (Word& w : filled)
        if (w.language.empty()) w.language = processor.language();
      if (!filled.empty()) run(events::WordsCommitted{std::move(filled)}, e);
      run(events::ProvisionalChanged{e.provisional}, e);
    }
    if (on_emission) on_emission(e);
    t.emissions.push_back(std::move(e));
  };
  for (size_t at = 0; at < pcm.size(); at += chunk) {
    const size_t n = std::min(chunk, pcm.size() - at);
    const double audio_time = static_cast<double>(at + n) / kSampleRate;
    if (options.realtime) {
      // Audio arrives no faster than it is spoken.
      std::this_thread::sleep_until(start + std::chrono::duration<double>(audio_time));
    }
    const std::span<const float> samples(pcm.data() + at, n);
    for (stages::Stage* stage : stages) stage->audio(samples, static_cast<double>(at) / kSampleRate);
    processor.insert_audio(samples, audio_time);
    emit(processor.process().committed, audio_time);
  }
  emit(processor.finish().committed, static_cast<double>(pcm.size()) / kSampleRate);
  t.language = processor.language();
  if (!stages.empty()) {
    // The end of the stream closes the last segment (its final is the last
    // emission's) and names the last words' speakers.
    t.translated = translating;
    run(events::EndOfStream{}, t.emissions.back());
  }
  for (stages::Stage* stage : stages) stage->attach({});
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
  std::string out = times + std::string(",\"committed\":") + protocol::words_json(e.committed) +
                    ",\"provisional\":" + json_quote(words_text(e.provisional));
  if (e.translating)
    out += ",\"translation_committed\":" + json_quote(e.translation_committed) +
           ",\"translation_draft\":" + json_quote(e.translation_draft);
  return out + "}";
}

namespace {

std::string translation_text(const Transcript& t) {
  std::string out;
  for (const TranslatedSegment& s : t.translations) {
    std::string text = s.translation;
    const size_t b = text.find_first_not_of(' ');
    text = b == std::string::npos ? "" : text.substr(b);
    if (text.empty()) continue;
    if (!out.empty() && static_cast<unsigned char>(text.front()) < 0x80) out += ' ';
    out += text;
  }
  return out;
}

// Cues of the translated segments: the source line, then its translation.
std::vector<protocol::Segment> translated_cues(const Transcript& t) {
  std::vector<protocol::Segment> cues;
  for (const TranslatedSegment& s : t.translations) cues.push_back({s.start, s.end, s.source + "\n" + s.translation});
  return cues;
}

}  // namespace

std::string format_transcript(const Transcript& t, const std::string& format, const std::string& file_name) {
  if (format == "rttm") {
    // Speaker turns (a diarization model's), as NIST's scorers read them; the file id is the name's stem.
    std::string id = std::filesystem::path(file_name).stem().string();
    for (char& c : id)
      if (std::isspace(static_cast<unsigned char>(c))) c = '_';
    return protocol::format_rttm(protocol::segments(t.words), id.empty() ? "audio" : id);
  }
  if (t.translated) {
    // With --translate-to every format carries the translation (per closed segment).
    if (format == "txt") return protocol::transcript_text(t.words) + "\n" + translation_text(t) + "\n";
    if (format == "json") {
      std::string base = protocol::transcript_json(t.words, t.language, file_name);
      const size_t close = base.rfind('}');
      std::string segments = "[";
      for (const TranslatedSegment& s : t.translations) {
        char times[64];
        std::snprintf(times, sizeof times, "{\"start\":%.3f,\"end\":%.3f", s.start, s.end);
        if (segments.size() > 1) segments += ",";
        segments += times + std::string(",\"source\":") + json_quote(s.source) +
                    ",\"translation\":" + json_quote(s.translation) + "}";
      }
      segments += "]";
      return base.substr(0, close) + ",\"translation\":" + json_quote(translation_text(t)) +
             ",\"translation_segments\":" + segments + base.substr(close);
    }
    if (format == "srt") return protocol::format_srt(translated_cues(t));
    if (format == "vtt") return protocol::format_vtt(translated_cues(t));
  }
  if (format == "txt") return protocol::transcript_turns(t.words) + "\n";
  if (format == "json") return protocol::transcript_json(t.words, t.language, file_name);
  // The CLI has no session (no pauses from a VAD): the rule's word-gap threshold
  // is the session's default pause length.
  if (format == "srt") return protocol::format_srt(protocol::segments(t.words));
  if (format == "vtt") return protocol::format_vtt(protocol::segments(t.words));
  throw Error(ErrorCode::kInvalidArgument, "unknown --format '" + format + "' (use txt, json, srt, vtt or rttm)");
}

}  // namespace earshot::cli

// The engine behind `earshot transcribe`: feed audio through an online processor
// in chunks, collect committed words and per-emission events, and format them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/online_processor.h"
#include "stages/stage.h"

namespace earshot::cli {

// How a file is fed to a stream (the stream itself comes from engine::Engine::open_stream).
struct TranscribeOptions {
  double chunk_seconds = 0.5;
  bool realtime = false;
};

struct Emission {
  double emission_time = 0;  // wall-clock seconds since the stream started
  double audio_time = 0;     // seconds of audio fed so far
  std::vector<Word> committed;
  std::vector<Word> provisional;
  // With --translate-to: target text committed at this emission, and the draft now.
  bool translating = false;
  std::string translation_committed;
  std::string translation_draft;
};

// A closed segment's source and its final translation.
struct TranslatedSegment {
  double start = 0, end = 0;
  std::string source;
  std::string translation;
};

struct Transcript {
  std::vector<Word> words;
  std::vector<Emission> emissions;
  std::string language;
  bool translated = false;
  std::vector<TranslatedSegment> translations;
};

// Feeds `pcm` (16 kHz mono) in chunks, processing after each, then finishes.
// on_emission sees every emission as it happens (live display, events file).
// With (synchronous) stages, every chunk's audio and every emission's events go
// through them in order: the transcript carries the translation's finals
// (`translating`: its emissions carry the translation fields) and the speakers
// SpeakersAssigned names.
Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission,
                      const std::vector<stages::Stage*>& stages, bool translating);
// One translation stage, or none.
Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission = {},
                      stages::Stage* translation = nullptr);

std::string words_text(const std::vector<Word>& words);
std::string format_transcript(const Transcript& t, const std::string& format, const std::string& file_name);
std::string emission_json(const Emission& e);

}  // namespace earshot::cli

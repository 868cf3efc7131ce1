// The engine behind `earshot transcribe`: feed audio through an online processor
// in chunks, collect committed words and per-emission events, and format them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/online_processor.h"

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
};

struct Transcript {
  std::vector<Word> words;
  std::vector<Emission> emissions;
  std::string language;
};

// Feeds `pcm` (16 kHz mono) in chunks, processing after each, then finishes.
// on_emission sees every emission as it happens (live display, events file).
Transcript transcribe(OnlineProcessor& processor, const std::vector<float>& pcm, const TranscribeOptions& options,
                      const std::function<void(const Emission&)>& on_emission = {});

std::string words_text(const std::vector<Word>& words);
std::string format_transcript(const Transcript& t, const std::string& format, const std::string& file_name);
std::string emission_json(const Emission& e);

}  // namespace earshot::cli

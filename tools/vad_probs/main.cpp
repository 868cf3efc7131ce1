// earshot_vad_probs: prints the Silero speech probability of every 512-sample
// window of an audio file as "index probability" lines (the format of
// ../shared/reference/jfk-silero-v6.2.0-probs-whispercpp.txt), or with
// --segments the speech start/end events, plus the time taken on stderr.
//   earshot_vad_probs MODEL AUDIO [--segments] [--previous-context] [--chunk N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "audio/audio.h"
#include "common/error.h"
#include "vad/vad.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL AUDIO [--segments] [--previous-context] [--chunk N]\n", argv[0]);
    return 2;
  }
  bool segments = false;
  earshot::vad::VadSessionOptions options;
  size_t chunk = 0;  // 0: the whole file at once
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--segments")) {
      segments = true;
    } else if (!std::strcmp(argv[i], "--previous-context")) {
      options.context = earshot::vad::WindowContext::kPreviousSamples;
    } else if (!std::strcmp(argv[i], "--chunk") && i + 1 < argc) {
      chunk = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  try {
    const auto model = earshot::vad::VadModel::load(argv[1]);
    const std::vector<float> samples = earshot::audio::load_file(argv[2]);
    earshot::vad::SpeechDetector detector(model, {}, options);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> probs;
    std::vector<earshot::vad::SpeechEvent> events;
    auto take = [&](earshot::vad::SpeechDetector::Update u) {
      probs.insert(probs.end(), u.probabilities.begin(), u.probabilities.end());
      events.insert(events.end(), u.events.begin(), u.events.end());
    };
    const size_t step = chunk ? chunk : samples.size() + 1;
    for (size_t pos = 0; pos < samples.size(); pos += step) {
      take(detector.push(std::span(samples).subspan(pos, std::min(step, samples.size() - pos))));
    }
    take(detector.finish());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (segments) {
      for (const auto& e : events) {
        std::printf("%s %.3f\n", e.kind == earshot::vad::SpeechEvent::Kind::kSpeechStart ? "start" : "end",
                    e.seconds());
      }
    } else {
      for (size_t i = 0; i < probs.size(); ++i) std::printf("%zu %.6f\n", i, probs[i]);
    }
    const double audio_s = static_cast<double>(samples.size()) / earshot::kSampleRate;
    std::fprintf(stderr, "%zu windows, %.2f s audio in %.1f ms: %.0f windows/s, RTF %.5f\n", probs.size(), audio_s,
                 seconds * 1e3, probs.size() / seconds, seconds / audio_s);
  } catch (const earshot::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Engines over generated random-weight Whisper models, loaded the way every
// command loads a model: engine::load on a file.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../model/model_test_util.h"
#include "engine/families.h"

namespace earshot::engine::testing {

// Writes `model` to a temporary file and loads it through engine::load with `spec`'s settings.
inline std::shared_ptr<const Engine> load_random_engine(const whisper::RandomModelSpec& model, const std::string& tag,
                                                        ModelSpec spec = {}) {
  whisper::testing::TempDir dir(tag);
  spec.path = dir / "model.bin";
  whisper::write_random_model(model, spec.path);
  return load(spec);
}

// One stream of `engine` opened with `request`, fed `pcm` in pieces of `chunk`
// samples, processed after each and finished: every committed word.
inline std::vector<Word> stream_words(const Engine& engine, const std::vector<float>& pcm, size_t chunk,
                                      const StreamRequest& request) {
  auto processor = engine.open_stream(request);
  std::vector<Word> words;
  for (size_t at = 0; at < pcm.size(); at += chunk) {
    const size_t n = std::min(chunk, pcm.size() - at);
    processor->insert_audio(std::span<const float>(pcm.data() + at, n), static_cast<double>(at + n) / 16000);
    for (Word& w : processor->process().committed) words.push_back(std::move(w));
  }
  for (Word& w : processor->finish().committed) words.push_back(std::move(w));
  return words;
}

// The same with only a policy ("" = the default).
inline std::vector<Word> stream_words(const Engine& engine, const std::vector<float>& pcm, size_t chunk,
                                      const std::string& policy = "") {
  StreamRequest request;
  request.policy = policy;
  return stream_words(engine, pcm, chunk, request);
}

inline std::string text_of(const std::vector<Word>& words) {
  std::string text;
  for (const Word& w : words) text += w.text;
  return text;
}

}  // namespace earshot::engine::testing

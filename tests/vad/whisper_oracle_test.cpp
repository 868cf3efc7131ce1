// Parity with the pinned libwhisper (test oracle only; earshot never links it):
// whisper.cpp's own Silero implementation on the same model file and audio.
#include <gtest/gtest.h>
#include <whisper.h>

#include <cmath>

#include "tests/vad/test_util.h"
#include "vad/vad.h"

namespace earshot::vad {
namespace {

std::vector<float> libwhisper_probs(const std::vector<float>& samples) {
  whisper_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  whisper_vad_context_params params = whisper_vad_default_context_params();
  params.n_threads = 1;
  const std::string path = test::shared_path("models/silero-v6.2.0-ggml.bin").string();
  whisper_vad_context* ctx = whisper_vad_init_from_file_with_params(path.c_str(), params);
  if (!ctx) return {};
  std::vector<float> probs;
  if (whisper_vad_detect_speech(ctx, samples.data(), static_cast<int>(samples.size()))) {
    probs.assign(whisper_vad_probs(ctx), whisper_vad_probs(ctx) + whisper_vad_n_probs(ctx));
  }
  whisper_vad_free(ctx);
  return probs;
}

TEST(LibWhisperOracle, SameProbabilitiesAsWhisperCppOnJfkAndLibrivox) {
  for (const char* file : {"data/jfk.wav", "data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"}) {
    const std::vector<float> samples = test::read_wav_s16_mono_16k(test::shared_path(file));
    const std::vector<float> expected = libwhisper_probs(samples);
    ASSERT_FALSE(expected.empty()) << file;
    VadSession session(test::silero());
    std::vector<float> probs = session.push(samples);
    if (auto tail = session.flush()) probs.push_back(*tail);
    ASSERT_EQ(probs.size(), expected.size()) << file;
    double max_diff = 0.0;
    for (size_t i = 0; i < probs.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(probs[i]) - expected[i]));
    }
    // Same ops in the same order on the same ggml: identical up to float noise.
    EXPECT_LE(max_diff, 1e-6) << file;
    std::printf("%s: %zu windows, max |p - p_libwhisper| = %.3g\n", file, probs.size(), max_diff);
  }
}

}  // namespace
}  // namespace earshot::vad

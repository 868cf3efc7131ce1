// The streaming NeMo mel equals nemo_log_mel over the whole stream, frame for
// frame, for any split of the audio; refuses utterance normalisation.
#include "features/nemo_mel_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/error.h"

namespace earshot::features {
namespace {

TEST(NemoMelStream, EqualsTheWholeStreamForAnySplit) {
  NemoMelConfig c;
  c.n_mels = 16, c.normalize_per_feature = false;
  std::vector<float> filters(static_cast<size_t>(c.n_mels) * (c.n_fft / 2 + 1));
  for (size_t i = 0; i < filters.size(); ++i) filters[i] = 0.01f * static_cast<float>((i * 7) % 13);
  std::vector<float> window(400);
  for (int i = 0; i < 400; ++i) window[i] = 0.5f - 0.5f * std::cos(2 * M_PI * i / 399.0);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  NemoMelStream stream(c, filters, window);
  for (size_t n : {size_t{1}, size_t{100}, size_t{255}, size_t{4321}}) {
    std::vector<float> audio(n);
    for (float& v : audio) v = normal(rng);
    const FrameMajorMel want = nemo_log_mel(audio, c, filters, window);
    for (size_t max_piece : {size_t{1}, size_t{97}, size_t{1000}}) {
      std::uniform_int_distribution<size_t> size(1, max_piece);
      std::vector<float> got;
      int frames = 0;
      for (size_t at = 0; at < n;) {
        const size_t s = std::min(size(rng), n - at);
        const FrameMajorMel m = stream.push(std::span<const float>(audio).subspan(at, s));
        got.insert(got.end(), m.data.begin(), m.data.end());
        frames += m.n_frames;
        at += s;
      }
      const FrameMajorMel rest = stream.finish();
      got.insert(got.end(), rest.data.begin(), rest.data.end());
      frames += rest.n_frames;
      ASSERT_EQ(frames, want.n_frames) << n << " " << max_piece;
      EXPECT_EQ(got, want.data) << n << " " << max_piece;
    }
  }
}

TEST(NemoMelStream, RefusesPerFeatureNormalisation) {
  NemoMelConfig c;
  EXPECT_THROW(NemoMelStream(c, {}, {}), Error);
}

}  // namespace
}  // namespace earshot::features

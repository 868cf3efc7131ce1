// NeMo's log-mel (features/nemo_mel.h): NeMo's frame count, floor(n / hop), on
// every length n * 160 + k, libparakeet's one frame more as an option (the same
// frames, plus the one centred on the audio's end), and the per-feature
// normalisation's statistics over the frames that hold audio only.
#include "features/nemo_mel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nemo_test_tables.h"

namespace earshot::features {
namespace {

using testing::hann_400;
using testing::noise;
using testing::toy_filters;

NemoMelConfig config(bool normalise, NemoFrameCount count) {
  NemoMelConfig c;
  c.n_mels = 16;
  c.normalize_per_feature = normalise;
  c.frame_count = count;
  return c;
}

// NeMo's FilterbankFeatures.get_seq_len: floor((n + 2 (n_fft / 2) - n_fft) / hop).
TEST(NemoMel, KeepsNeMosFrameCountOnEveryLength) {
  const std::vector<float> window = hann_400();
  const std::vector<float> audio = noise(5 * 160 + 159, 1);
  for (bool normalise : {false, true}) {
    const NemoMelConfig nemo = config(normalise, NemoFrameCount::kNemo);
    const NemoMelConfig lp = config(normalise, NemoFrameCount::kLibparakeet);
    const std::vector<float> filters = toy_filters(nemo);
    for (int m = 0; m <= 5; ++m) {
      for (int k = 0; k < 160; ++k) {
        const int n = m * 160 + k;
        const std::span<const float> x(audio.data(), static_cast<size_t>(n));
        const FrameMajorMel mel = nemo_log_mel(x, nemo, filters, window);
        ASSERT_EQ(mel.n_frames, m) << "n " << n;
        ASSERT_EQ(nemo_frame_count(n, nemo), m) << "n " << n;
        ASSERT_EQ(mel.data.size(), static_cast<size_t>(m) * 16);
        const int lp_frames = n == 0 ? 0 : m + 1;
        ASSERT_EQ(nemo_frame_count(n, lp), lp_frames) << "n " << n;
        ASSERT_EQ(nemo_log_mel(x, lp, filters, window).n_frames, lp_frames) << "n " << n;
      }
    }
  }
  // The finding's 12.0 s clip: 1200 frames (libparakeet: 1201).
  EXPECT_EQ(nemo_frame_count(192000, config(true, NemoFrameCount::kNemo)), 1200);
  EXPECT_EQ(nemo_frame_count(192000, config(true, NemoFrameCount::kLibparakeet)), 1201);
}

// libparakeet's count adds the frame centred on the audio's end; the frames
// before it are NeMo's, bit for bit (its statistics leave that frame out).
TEST(NemoMel, LibparakeetsCountAddsTheFrameCentredOnTheEnd) {
  const std::vector<float> window = hann_400();
  for (bool normalise : {false, true}) {
    const NemoMelConfig nemo = config(normalise, NemoFrameCount::kNemo);
    const NemoMelConfig lp = config(normalise, NemoFrameCount::kLibparakeet);
    const std::vector<float> filters = toy_filters(nemo);
    for (int n : {160, 161, 3 * 160, 3 * 160 + 80, 20 * 160 + 159}) {
      const std::vector<float> audio = noise(static_cast<size_t>(n), 2);
      const FrameMajorMel a = nemo_log_mel(audio, nemo, filters, window);
      const FrameMajorMel b = nemo_log_mel(audio, lp, filters, window);
      ASSERT_EQ(b.n_frames, a.n_frames + 1) << n;
      EXPECT_EQ(std::vector<float>(b.data.begin(), b.data.begin() + static_cast<std::ptrdiff_t>(a.data.size())), a.data)
          << "n " << n << (normalise ? " normalised" : "");
    }
  }
}

// Per-feature normalisation: mean and sample standard deviation (+ 1e-5) of each
// feature over the n / hop frames that hold audio, applied to every frame kept
// (NeMo's normalize_batch over seq_len); a single frame normalises to 0.
TEST(NemoMel, NormalisesEachFeatureOverTheFramesThatHoldAudio) {
  const std::vector<float> window = hann_400();
  for (NemoFrameCount count : {NemoFrameCount::kNemo, NemoFrameCount::kLibparakeet}) {
    const NemoMelConfig raw_config = config(false, count), norm_config = config(true, count);
    const std::vector<float> filters = toy_filters(raw_config);
    for (int n : {160, 2 * 160, 2 * 160 + 1, 37 * 160, 37 * 160 + 1, 37 * 160 + 159}) {
      const std::vector<float> audio = noise(static_cast<size_t>(n), 3);
      const FrameMajorMel raw = nemo_log_mel(audio, raw_config, filters, window);
      const FrameMajorMel norm = nemo_log_mel(audio, norm_config, filters, window);
      ASSERT_EQ(norm.n_frames, raw.n_frames);
      const int valid = n / 160;
      for (int m = 0; m < 16; ++m) {
        double sum = 0, sq = 0;
        for (int f = 0; f < valid; ++f) sum += raw.data[static_cast<size_t>(f) * 16 + m];
        const double mean = sum / valid;
        for (int f = 0; f < valid; ++f) sq += std::pow(raw.data[static_cast<size_t>(f) * 16 + m] - mean, 2);
        const double std_dev = valid > 1 ? std::sqrt(sq / (valid - 1)) : 0.0;
        double norm_sum = 0;
        for (int f = 0; f < norm.n_frames; ++f) {
          const double want = (raw.data[static_cast<size_t>(f) * 16 + m] - mean) / (std_dev + 1e-5);
          ASSERT_NEAR(norm.data[static_cast<size_t>(f) * 16 + m], want, 1e-5 * (1 + std::abs(want)))
              << "n " << n << " frame " << f << " feature " << m;
          if (f < valid) norm_sum += norm.data[static_cast<size_t>(f) * 16 + m];
        }
        EXPECT_NEAR(norm_sum / valid, 0.0, 1e-5) << "n " << n << " feature " << m;
        if (valid == 1) {
          EXPECT_EQ(norm.data[static_cast<size_t>(m)], 0.0f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace earshot::features

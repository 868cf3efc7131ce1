// The streaming NeMo mel equals nemo_log_mel over the whole stream, frame for
// frame, for any split of the audio and either frame count (NeMo's n / hop on
// every length n * 160 + k, or libparakeet's one more); refuses utterance
// normalisation.
#include "features/nemo_mel_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "nemo_test_tables.h"

namespace earshot::features {
namespace {

using testing::hann_400;
using testing::noise;
using testing::toy_filters;

// The audio pushed in random pieces of 1..max_piece samples, then finished.
FrameMajorMel streamed(NemoMelStream& stream, const NemoMelConfig& c, const std::vector<float>& audio, size_t max_piece,
                       std::mt19937& rng) {
  std::uniform_int_distribution<size_t> size(1, max_piece);
  FrameMajorMel all;
  auto append = [&](const FrameMajorMel& m) {
    all.data.insert(all.data.end(), m.data.begin(), m.data.end());
    all.n_frames += m.n_frames;
  };
  for (size_t at = 0; at < audio.size();) {
    const size_t s = std::min(size(rng), audio.size() - at);
    const FrameMajorMel m = stream.push(std::span<const float>(audio).subspan(at, s));
    // A frame pushed is one the whole stream keeps: never past the samples' count so far.
    EXPECT_LE(all.n_frames + m.n_frames, nemo_frame_count(static_cast<long long>(at + s), c));
    append(m);
    at += s;
  }
  append(stream.finish());
  return all;
}

TEST(NemoMelStream, EqualsTheWholeStreamForAnySplit) {
  for (NemoFrameCount count : {NemoFrameCount::kNemo, NemoFrameCount::kLibparakeet}) {
    NemoMelConfig c;
    c.n_mels = 16, c.normalize_per_feature = false, c.frame_count = count;
    const std::vector<float> filters = toy_filters(c), window = hann_400();
    std::mt19937 rng(1);
    NemoMelStream stream(c, filters, window);
    for (size_t n : {size_t{1}, size_t{100}, size_t{255}, size_t{4321}}) {
      const std::vector<float> audio = noise(n, static_cast<unsigned>(n));
      const FrameMajorMel want = nemo_log_mel(audio, c, filters, window);
      for (size_t max_piece : {size_t{1}, size_t{97}, size_t{1000}}) {
        const FrameMajorMel got = streamed(stream, c, audio, max_piece, rng);
        ASSERT_EQ(got.n_frames, want.n_frames) << n << " " << max_piece;
        EXPECT_EQ(got.data, want.data) << n << " " << max_piece;
      }
    }
  }
}

// NeMo's count, floor(n / hop), at the end of every length m * 160 + k, as the
// whole stream's (libparakeet's: one more).
TEST(NemoMelStream, EndsWithNeMosFrameCountOnEveryLength) {
  for (NemoFrameCount count : {NemoFrameCount::kNemo, NemoFrameCount::kLibparakeet}) {
    NemoMelConfig c;
    c.n_mels = 8, c.normalize_per_feature = false, c.frame_count = count;
    const std::vector<float> filters = toy_filters(c), window = hann_400();
    const std::vector<float> audio = noise(9 * 160 + 159, 7);
    std::mt19937 rng(2);
    NemoMelStream stream(c, filters, window);
    for (int m : {0, 1, 2, 9}) {
      for (int k = 0; k < 160; ++k) {
        const int n = m * 160 + k;
        if (n == 0) continue;
        const std::vector<float> x(audio.begin(), audio.begin() + n);
        const FrameMajorMel got = streamed(stream, c, x, 200, rng);
        ASSERT_EQ(got.n_frames, count == NemoFrameCount::kNemo ? m : m + 1) << "n " << n;
        ASSERT_EQ(got.data, nemo_log_mel(x, c, filters, window).data) << "n " << n;
      }
    }
  }
}

TEST(NemoMelStream, RefusesPerFeatureNormalisation) {
  NemoMelConfig c;
  EXPECT_THROW(NemoMelStream(c, {}, {}), Error);
}

}  // namespace
}  // namespace earshot::features

#include "features/mel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"

namespace earshot::features {
namespace {

const std::string kShared = EARSHOT_SHARED_DIR;

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ADD_FAILURE() << "cannot open " << path;
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename T>
T read_le(const std::vector<char>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Minimal RIFF reader for the 16 kHz mono s16 test file (the real one lives in src/audio).
std::vector<float> read_wav_s16_mono(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  EXPECT_GE(bytes.size(), 12u);
  EXPECT_EQ(std::string(bytes.data(), 4), "RIFF");
  EXPECT_EQ(std::string(bytes.data() + 8, 4), "WAVE");
  size_t pos = 12;
  while (pos + 8 <= bytes.size()) {
    const std::string id(bytes.data() + pos, 4);
    const uint32_t size = read_le<uint32_t>(bytes, pos + 4);
    if (id == "fmt ") {
      EXPECT_EQ(read_le<uint16_t>(bytes, pos + 8), 1);        // PCM
      EXPECT_EQ(read_le<uint16_t>(bytes, pos + 10), 1);       // mono
      EXPECT_EQ(read_le<uint32_t>(bytes, pos + 12), 16000u);  // rate
      EXPECT_EQ(read_le<uint16_t>(bytes, pos + 22), 16);      // bits
    } else if (id == "data") {
      std::vector<float> samples(size / 2);
      for (size_t i = 0; i < samples.size(); ++i) samples[i] = read_le<int16_t>(bytes, pos + 8 + 2 * i) / 32768.0f;
      return samples;
    }
    pos += 8 + size + (size & 1);
  }
  ADD_FAILURE() << "no data chunk in " << path;
  return {};
}

// The 80-bin filters stored in a ggml model file: magic, 11 hparams, n_mel, n_fft, floats.
std::vector<float> read_model_filters(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  EXPECT_EQ(read_le<uint32_t>(bytes, 0), 0x67676d6cu);
  const int32_t n_mel = read_le<int32_t>(bytes, 4 + 11 * 4);
  const int32_t n_fft = read_le<int32_t>(bytes, 4 + 12 * 4);
  EXPECT_EQ(n_mel, 80);
  EXPECT_EQ(n_fft, kFftBins);
  std::vector<float> filters(static_cast<size_t>(n_mel) * n_fft);
  std::memcpy(filters.data(), bytes.data() + 4 + 13 * 4, filters.size() * sizeof(float));
  return filters;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
  return diff;
}

TEST(LogMel, MatchesWhisperCppOnJfk) {
  const std::vector<float> samples = read_wav_s16_mono(kShared + "/data/jfk.wav");
  ASSERT_EQ(samples.size(), 176000u);
  const std::vector<float> filters = read_model_filters(kShared + "/models/for-tests-ggml-tiny.en.bin");
  const std::vector<char> ref_bytes = read_bytes(kShared + "/reference/jfk-mel80-whispercpp.f32");
  std::vector<float> reference(ref_bytes.size() / sizeof(float));
  std::memcpy(reference.data(), ref_bytes.data(), reference.size() * sizeof(float));
  ASSERT_EQ(reference.size(), 80u * 4100u);

  const Mel mel = log_mel_spectrogram(samples, filters, 80, kChunkSeconds * kSampleRate, 2);
  EXPECT_EQ(mel.n_mel, 80);
  EXPECT_EQ(mel.n_frames, 4100);  // (176000 + 480000) / 160
  const double diff = max_abs_diff(mel.data, reference);
  std::cout << "jfk mel max_abs_diff vs whisper.cpp = " << diff << "\n";
  RecordProperty("max_abs_diff", std::to_string(diff));
  EXPECT_LT(diff, 1e-4);
}

TEST(LogMel, ThreadCountDoesNotChangeTheResult) {
  std::vector<float> samples(16000 * 3 + 77);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = 0.3f * std::sin(0.01f * i * (1.0f + i * 1e-5f));
  const std::vector<float> filters = mel_filter_bank(80);
  const Mel one = log_mel_spectrogram(samples, filters, 80, kChunkSeconds * kSampleRate, 1);
  for (int threads : {2, 3, 7, 64}) {
    const Mel many = log_mel_spectrogram(samples, filters, 80, kChunkSeconds * kSampleRate, threads);
    EXPECT_EQ(many.n_frames, one.n_frames);
    EXPECT_EQ(many.data, one.data) << threads << " threads";
  }
}

TEST(LogMel, FrameCountFollowsPadding) {
  const std::vector<float> filters = mel_filter_bank(80);
  std::vector<float> samples(16000, 0.1f);
  EXPECT_EQ(log_mel_spectrogram(samples, filters, 80).n_frames, 3100);      // (16000 + 480000) / 160
  EXPECT_EQ(log_mel_spectrogram(samples, filters, 80, 0).n_frames, 100);    // 16000 / 160
  EXPECT_EQ(log_mel_spectrogram(samples, filters, 80, 159).n_frames, 100);  // rounds down
  EXPECT_EQ(log_mel_spectrogram(samples, filters, 80, 160).n_frames, 101);
}

TEST(LogMel, SilenceAndTinyInputsAreWellDefined) {
  const std::vector<float> filters = mel_filter_bank(80);
  // No signal at all: every value is log10(1e-10) = -10, scaled to (-10 + 4) / 4.
  const Mel empty = log_mel_spectrogram({}, filters, 80);
  EXPECT_EQ(empty.n_frames, 3000);
  ASSERT_EQ(empty.data.size(), 80u * 3000u);
  for (float v : empty.data) ASSERT_FLOAT_EQ(v, -1.5f);
  // Shorter than the reflected padding: must not read out of bounds.
  const std::vector<float> tiny = {0.5f, -0.25f, 0.125f};
  const Mel mel = log_mel_spectrogram(tiny, filters, 80, 0);
  EXPECT_EQ(mel.n_frames, 0);
  const Mel padded = log_mel_spectrogram(tiny, filters, 80, 1600);
  EXPECT_EQ(padded.n_frames, 10);
  for (float v : padded.data) ASSERT_TRUE(std::isfinite(v));
  // The loudest value becomes (max + 4) / 4 and the clamp keeps everything within 2 of it.
  const float top = *std::max_element(padded.data.begin(), padded.data.end());
  for (float v : padded.data) ASSERT_GE(v, top - 2.0f - 1e-6f);
}

TEST(LogMel, RejectsMismatchedFilters) {
  const std::vector<float> filters = mel_filter_bank(80);
  std::vector<float> samples(1000);
  EXPECT_THROW(log_mel_spectrogram(samples, filters, 128), Error);
  EXPECT_THROW(log_mel_spectrogram(samples, std::span<const float>(filters).first(100), 80), Error);
  EXPECT_THROW(log_mel_spectrogram(samples, filters, 0), Error);
  EXPECT_THROW(log_mel_spectrogram(samples, filters, 80, -1), Error);
}

TEST(MelFilterBank, EightyBinsMatchWhisperModelFile) {
  const std::vector<float> expected = read_model_filters(kShared + "/models/for-tests-ggml-tiny.en.bin");
  const std::vector<float> bank = mel_filter_bank(80);
  const double diff = max_abs_diff(bank, expected);
  std::cout << "mel_filter_bank(80) max_abs_diff vs model file = " << diff << "\n";
  RecordProperty("max_abs_diff", std::to_string(diff));
  EXPECT_LT(diff, 1e-7);
}

TEST(MelFilterBank, HundredTwentyEightBinsAreSlaneyTriangles) {
  const int n_mel = 128;
  const std::vector<float> bank = mel_filter_bank(n_mel);
  ASSERT_EQ(bank.size(), static_cast<size_t>(n_mel) * kFftBins);
  int previous_peak = -1;
  for (int m = 0; m < n_mel; ++m) {
    const float* row = bank.data() + static_cast<size_t>(m) * kFftBins;
    int begin = 0, end = kFftBins;
    while (begin < end && row[begin] == 0.0f) ++begin;
    while (end > begin && row[end - 1] == 0.0f) --end;
    ASSERT_LT(begin, end) << "empty filter " << m;
    // One triangle: contiguous support, rising to a single peak, then falling.
    const int peak = static_cast<int>(std::max_element(row, row + kFftBins) - row);
    for (int k = begin; k < end; ++k) ASSERT_GT(row[k], 0.0f) << m << " " << k;
    for (int k = begin + 1; k <= peak; ++k) ASSERT_GE(row[k], row[k - 1]) << m;
    for (int k = peak + 1; k < end; ++k) ASSERT_LE(row[k], row[k - 1]) << m;
    ASSERT_GE(peak, previous_peak) << "peaks move up in frequency";
    previous_peak = peak;
    // Slaney normalisation makes each triangle's area in Hz equal to 1 (40 Hz
    // per bin); only checkable where the triangle spans enough bins.
    if (end - begin >= 12) {
      double area = 0.0;
      for (int k = begin; k < end; ++k) area += row[k] * 40.0;
      EXPECT_NEAR(area, 1.0, 0.03) << "filter " << m;
    }
  }
  // Bin 0 (DC) is outside every triangle; the last filter reaches near Nyquist.
  EXPECT_EQ(bank[0], 0.0f);
  const float* last = bank.data() + static_cast<size_t>(n_mel - 1) * kFftBins;
  EXPECT_GT(last[kFftBins - 2], 0.0f);
  // The low filters are 23.4 Hz apart below 1 kHz: the first peaks at bin 1 (40 Hz).
  EXPECT_EQ(std::max_element(bank.begin(), bank.begin() + kFftBins) - bank.begin(), 1);
  EXPECT_THROW(mel_filter_bank(0), Error);
}

}  // namespace
}  // namespace earshot::features

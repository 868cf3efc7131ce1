#include "features/mel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <numbers>
#include <string>
#include <thread>
#include <utility>

#include "common/error.h"
#include "features/fft.h"

namespace earshot::features {
namespace {

// whisper.cpp pads the front by reflection and the back with zeros, half a
// window each, so frame i is centred on sample i * hop.
constexpr int kHalfWindow = kFftSize / 2;
// log10 of the power floor: what an all-zero frame turns into.
constexpr float kLogFloor = -10.0f;

// Slaney's mel scale as librosa implements it (htk=False): linear below 1 kHz,
// logarithmic above.
constexpr double kMelLinearStep = 200.0 / 3.0;
constexpr double kMelMinLogHz = 1000.0;
constexpr double kMelMinLogMel = kMelMinLogHz / kMelLinearStep;  // 15
const double kMelLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz) {
  if (hz >= kMelMinLogHz) return kMelMinLogMel + std::log(hz / kMelMinLogHz) / kMelLogStep;
  return hz / kMelLinearStep;
}

double mel_to_hz(double mel) {
  if (mel >= kMelMinLogMel) return kMelMinLogHz * std::exp(kMelLogStep * (mel - kMelMinLogMel));
  return kMelLinearStep * mel;
}

const std::vector<float>& hann_window() {
  // Periodic Hann (torch.hann_window(400)), as Whisper uses.
  static const std::vector<float> window = [] {
    std::vector<float> w(kFftSize);
    for (int i = 0; i < kFftSize; ++i) {
      w[i] = static_cast<float>(0.5 * (1.0 - std::cos(2.0 * std::numbers::pi * i / kFftSize)));
    }
    return w;
  }();
  return window;
}

const RealFft& fft400() {
  static const RealFft fft(kFftSize);
  return fft;
}

// log10 of a positive normal float to about 1e-7 relative error, branch-free
// so the per-frame loop vectorises (libm's log10f was a fifth of the run time):
// x = 2^e * m with m in [sqrt(1/2), sqrt(2)), ln(m) = 2 atanh(s), s = (m-1)/(m+1).
inline float log10_positive(float x) {
  // Offsetting the bits by those of sqrt(1/2) puts the mantissa in [sqrt(1/2), sqrt(2))
  // with integer operations only.
  constexpr int32_t kSqrtHalfBits = 0x3F3504F3;
  const int32_t shifted = std::bit_cast<int32_t>(x) - kSqrtHalfBits;
  const int32_t exponent = shifted >> 23;
  const float m = std::bit_cast<float>((shifted & 0x007FFFFF) + kSqrtHalfBits);
  const float s = (m - 1.0f) / (m + 1.0f);  // |s| <= 0.1716: the series below is exact to float precision
  const float s2 = s * s;
  const float ln_m = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9)))));
  constexpr float kLn2 = 0.693147180559945f;
  constexpr float kLog10E = 0.434294481903252f;
  return (static_cast<float>(exponent) * kLn2 + ln_m) * kLog10E;
}

// The non-zero span of each filter row; mel filters are triangles a few bins wide.
struct FilterSpan {
  int begin = 0;
  int end = 0;
};

std::vector<FilterSpan> filter_spans(std::span<const float> filters, int n_mel) {
  std::vector<FilterSpan> spans(n_mel);
  for (int m = 0; m < n_mel; ++m) {
    const float* row = filters.data() + static_cast<size_t>(m) * kFftBins;
    int begin = 0, end = kFftBins;
    while (begin < end && row[begin] == 0.0f) ++begin;
    while (end > begin && row[end - 1] == 0.0f) --end;
    spans[m] = {begin, end};
  }
  return spans;
}

}  // namespace

std::vector<float> mel_filter_bank(int n_mel) {
  if (n_mel <= 0 || n_mel > 512) {
    throw Error(ErrorCode::kInvalidArgument,
                "mel_filter_bank: n_mel must be in [1, 512], got " + std::to_string(n_mel));
  }
  // librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mel): triangles between
  // n_mel + 2 points equally spaced on the mel scale from 0 Hz to Nyquist,
  // scaled by 2 / (bandwidth in Hz) ("slaney" area normalisation).
  const double nyquist = kSampleRate / 2.0;
  std::vector<double> edges_hz(n_mel + 2);
  const double max_mel = hz_to_mel(nyquist);
  for (int i = 0; i < n_mel + 2; ++i) edges_hz[i] = mel_to_hz(max_mel * i / (n_mel + 1));

  std::vector<float> bank(static_cast<size_t>(n_mel) * kFftBins, 0.0f);
  for (int m = 0; m < n_mel; ++m) {
    const double lower_width = edges_hz[m + 1] - edges_hz[m];
    const double upper_width = edges_hz[m + 2] - edges_hz[m + 1];
    const double norm = 2.0 / (edges_hz[m + 2] - edges_hz[m]);
    for (int k = 0; k < kFftBins; ++k) {
      const double freq = nyquist * k / (kFftBins - 1);
      const double rising = (freq - edges_hz[m]) / lower_width;
      const double falling = (edges_hz[m + 2] - freq) / upper_width;
      const double weight = std::max(0.0, std::min(rising, falling));
      // librosa stores the triangle as float32 and then scales it in float64.
      bank[static_cast<size_t>(m) * kFftBins + k] =
          static_cast<float>(static_cast<double>(static_cast<float>(weight)) * norm);
    }
  }
  return bank;
}

Mel log_mel_spectrogram(std::span<const float> samples, std::span<const float> filters, int n_mel, int pad_samples,
                        int n_threads) {
  if (n_mel <= 0) throw Error(ErrorCode::kInvalidArgument, "log_mel_spectrogram: n_mel must be positive");
  if (filters.size() != static_cast<size_t>(n_mel) * kFftBins) {
    throw Error(ErrorCode::kInvalidArgument,
                "log_mel_spectrogram: filter bank has " + std::to_string(filters.size()) +
                    " values, expected n_mel * 201 = " + std::to_string(static_cast<size_t>(n_mel) * kFftBins));
  }
  if (pad_samples < 0) throw Error(ErrorCode::kInvalidArgument, "log_mel_spectrogram: pad_samples must be >= 0");
  n_threads = std::max(1, n_threads);

  const int64_t n_samples = static_cast<int64_t>(samples.size());
  // Only the reflected front, the signal and the zeros of the last window carry
  // data; frames starting past them are all zero.
  std::vector<float> padded(static_cast<size_t>(n_samples) + 2 * kHalfWindow, 0.0f);
  for (int i = 0; i < kHalfWindow; ++i) {
    const int64_t source = kHalfWindow - i;  // padded[0] = samples[200], ..., padded[199] = samples[1]
    padded[i] = source < n_samples ? samples[source] : 0.0f;
  }
  std::copy(samples.begin(), samples.end(), padded.begin() + kHalfWindow);

  Mel mel;
  mel.n_mel = n_mel;
  // torch.stft(center=True) of the padded signal, minus its last frame.
  mel.n_frames = static_cast<int>((n_samples + pad_samples) / kHopLength);
  mel.data.assign(static_cast<size_t>(n_mel) * mel.n_frames, kLogFloor);
  const int64_t data_end = n_samples + kHalfWindow;
  const int n_data_frames = static_cast<int>(std::min<int64_t>(mel.n_frames, (data_end + kHopLength - 1) / kHopLength));

  const std::vector<FilterSpan> spans = filter_spans(filters, n_mel);
  const std::vector<float>& window = hann_window();
  const RealFft& fft = fft400();

  constexpr int kBatch = RealFft::kBatch;
  // Frames [first_frame, end_frame): kBatch at a time through the SIMD FFT. Work
  // is split on multiples of kBatch so the result does not depend on n_threads.
  auto worker = [&](int first_frame, int end_frame) {
    std::vector<float> frames(static_cast<size_t>(kBatch) * kFftSize);
    std::vector<float> powers(static_cast<size_t>(kBatch) * kFftBins);
    std::vector<float> energies(n_mel);
    RealFft::Workspace workspace;
    const float* frame_ptrs[kBatch];
    float* power_ptrs[kBatch];
    for (int b = 0; b < kBatch; ++b) {
      frame_ptrs[b] = frames.data() + static_cast<size_t>(b) * kFftSize;
      power_ptrs[b] = powers.data() + static_cast<size_t>(b) * kFftBins;
    }
    for (int first = first_frame; first < end_frame; first += kBatch) {
      const int count = std::min(kBatch, end_frame - first);
      for (int b = 0; b < count; ++b) {
        float* frame = frames.data() + static_cast<size_t>(b) * kFftSize;
        const int64_t offset = static_cast<int64_t>(first + b) * kHopLength;
        const int available =
            static_cast<int>(std::min<int64_t>(kFftSize, static_cast<int64_t>(padded.size()) - offset));
        for (int j = 0; j < available; ++j) frame[j] = window[j] * padded[offset + j];
        std::fill(frame + available, frame + kFftSize, 0.0f);
      }
      if (count == kBatch) {
        fft.power_batch(frame_ptrs, power_ptrs, workspace);
      } else {
        for (int b = 0; b < count; ++b) fft.power(frame_ptrs[b], power_ptrs[b], workspace);
      }
      for (int b = 0; b < count; ++b) {
        const float* power = power_ptrs[b];
        for (int m = 0; m < n_mel; ++m) {
          const float* row = filters.data() + static_cast<size_t>(m) * kFftBins;
          float sum = 0.0f;
          for (int k = spans[m].begin; k < spans[m].end; ++k) sum += power[k] * row[k];
          energies[m] = std::max(sum, 1e-10f);
        }
        for (int m = 0; m < n_mel; ++m) energies[m] = log10_positive(energies[m]);
        const int i = first + b;
        for (int m = 0; m < n_mel; ++m) mel.data[static_cast<size_t>(m) * mel.n_frames + i] = energies[m];
      }
    }
  };

  const int n_groups = (n_data_frames + kBatch - 1) / kBatch;
  const int n_workers = std::min(n_threads, std::max(1, n_groups));
  const int groups_per_worker = (n_groups + n_workers - 1) / n_workers;
  const auto range_of = [&](int w) {
    const int begin = std::min(n_data_frames, w * groups_per_worker * kBatch);
    return std::pair{begin, std::min(n_data_frames, begin + groups_per_worker * kBatch)};
  };
  std::vector<std::thread> threads;
  threads.reserve(n_workers - 1);
  for (int w = 1; w < n_workers; ++w) {
    const auto [begin, end] = range_of(w);
    threads.emplace_back(worker, begin, end);
  }
  const auto [begin0, end0] = range_of(0);
  worker(begin0, end0);
  for (std::thread& t : threads) t.join();

  // Dynamic range of 8 (80 dB) below the loudest value, then scaled to about [-1, 1].
  double max_value = -1e20;
  for (float v : mel.data) max_value = std::max(max_value, static_cast<double>(v));
  const double floor = max_value - 8.0;
  for (float& v : mel.data) v = static_cast<float>((std::max(static_cast<double>(v), floor) + 4.0) / 4.0);
  return mel;
}

}  // namespace earshot::features

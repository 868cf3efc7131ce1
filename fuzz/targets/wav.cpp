// WAV reading: what audio::load_file does with a .wav before FFmpeg (the
// encoding check, the parse of every file back to back, downmix and resampling
// to 16 kHz mono). Invariants on the size paths: a parsed file has a rate
// earshot takes (8 kHz up) and whole frames, no more samples than its bytes
// hold, only finite samples, and 16 kHz output of at most two samples per input
// frame (plus the filter's tail per file). Any exception other than
// earshot::Error, any sanitizer report is a finding.
#include "audio/wav.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "audio/resample.h"
#include "common/error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  earshot::audio::looks_like_wav(bytes);
  try {
    if (!earshot::audio::wav_encoding_supported(bytes, "fuzz.wav")) return 0;
    const auto pcm = earshot::audio::parse_wav(bytes, "fuzz.wav");
    earshot::fuzz::check(pcm.channels > 0 && pcm.sample_rate >= earshot::audio::kMinInputSampleRate &&
                             pcm.sample_rate <= earshot::audio::kMaxInputSampleRate,
                         "a parsed WAV has channels and a rate earshot takes");
    earshot::fuzz::check(pcm.interleaved.size() % pcm.channels == 0, "whole frames");
    const auto files = earshot::audio::parse_wav_files(bytes, "fuzz.wav");
    earshot::fuzz::check(!files.empty() && files[0].interleaved == pcm.interleaved, "the first file is parse_wav's");
    size_t frames = 0, samples = 0;
    for (const auto& file : files) {
      earshot::fuzz::check(file.sample_rate >= earshot::audio::kMinInputSampleRate, "every file's rate is checked");
      frames += file.frames();
      samples += file.interleaved.size();
      for (float v : file.interleaved) earshot::fuzz::check(std::isfinite(v), "every sample is a finite number");
    }
    earshot::fuzz::check(samples <= size, "no more samples than bytes");
    const auto mono = earshot::audio::wav_to_16k_mono(bytes, "fuzz.wav");
    earshot::fuzz::check(mono.size() <= 2 * frames + 256 * files.size(), "at most two 16 kHz samples per frame");
  } catch (const earshot::Error&) {
  }
  return 0;
}

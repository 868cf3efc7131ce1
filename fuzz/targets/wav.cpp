// WAV reading: what audio::load_file does with a .wav before FFmpeg (the
// encoding check, the parse, downmix and resampling to 16 kHz mono).
// Any exception other than earshot::Error, any sanitizer report is a finding.
#include "audio/wav.h"

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  earshot::audio::looks_like_wav(bytes);
  try {
    if (!earshot::audio::wav_encoding_supported(bytes, "fuzz.wav")) return 0;
    const auto pcm = earshot::audio::parse_wav(bytes, "fuzz.wav");
    earshot::fuzz::check(pcm.channels > 0 && pcm.sample_rate > 0, "a parsed WAV has channels and a rate");
    earshot::fuzz::check(pcm.interleaved.size() % pcm.channels == 0, "whole frames");
    earshot::audio::wav_to_16k_mono(bytes, "fuzz.wav");
  } catch (const earshot::Error&) {
  }
  return 0;
}

// WAV (RIFF/WAVE) reading without FFmpeg's container and codec libraries
// (library earshot_audio_wav): the parser load_file uses, and a WAV-only file
// reader for programs that must not depend on FFmpeg (the developer tools,
// which run on machines without it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace earshot::audio {

struct PcmAudio {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> interleaved;  // frames * channels samples in [-1, 1]
  size_t frames() const { return channels ? interleaved.size() / channels : 0; }
};

// True when the bytes start like a RIFF/WAVE file.
bool looks_like_wav(std::span<const uint8_t> bytes);

// True when the WAV's sample encoding is one parse_wav decodes (PCM 8/16/24/32,
// float 32/64, plain or WAVE_FORMAT_EXTENSIBLE). Others (A-law, ADPCM...) are
// left to FFmpeg. Throws like parse_wav when the header itself is invalid.
bool wav_encoding_supported(std::span<const uint8_t> bytes, const std::string& name);

// Decodes a whole WAV file. Unknown chunks are skipped. Throws
// earshot::Error(kInvalidAudio) naming `name` and what is wrong (truncated
// header or data, missing chunk, inconsistent format fields, a sample rate
// outside check_input_rate's range (checked before any sample is read), a float
// sample that is NaN or infinite...).
PcmAudio parse_wav(std::span<const uint8_t> bytes, const std::string& name);

// Every WAV file of `bytes`: the first, then each RIFF/WAVE file that follows the
// one before's 'data' chunk (WAV files sent back to back), skipping the chunks in
// between; trailing bytes that start no WAVE file are ignored, as parse_wav
// ignores them. A 'data' size of 0 or 0xFFFFFFFF (streaming writers' "until the
// end") ends the list.
std::vector<PcmAudio> parse_wav_files(std::span<const uint8_t> bytes, const std::string& name);

// Averages the channels of interleaved samples into one.
std::vector<float> downmix_to_mono(std::span<const float> interleaved, int channels);

// parse_wav_files, downmix_to_mono and resample_to_16k: a whole WAV file (or
// several back to back, each resampled from its own rate) as 16 kHz mono.
std::vector<float> wav_to_16k_mono(std::span<const uint8_t> bytes, const std::string& name);

// The whole file's bytes. Throws earshot::Error(kIo) naming the file: no such file,
// a directory, cannot open, read error.
std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path);

// Reads a WAV file as 16 kHz mono. Throws like read_file_bytes and parse_wav:
// kInvalidAudio when the file is empty or not a WAV file, kUnsupported for a WAV
// whose encoding only FFmpeg decodes (A-law, ADPCM...; audio::load_file reads those).
std::vector<float> load_wav_file(const std::filesystem::path& path);

}  // namespace earshot::audio

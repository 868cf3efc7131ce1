// Helpers shared by the VAD tests: paths into ../shared and a minimal WAV reader
// (16-bit PCM mono 16 kHz only; the audio part owns general decoding).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "vad/vad.h"

namespace earshot::vad::test {

inline std::filesystem::path shared_path(const std::string& relative) {
  return std::filesystem::path(EARSHOT_SHARED_DIR) / relative;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Samples scaled by 1/32768, as whisper.cpp's reader (miniaudio) does.
inline std::vector<float> read_wav_s16_mono_16k(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + at, 2);
    return v;
  };
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 || std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
    throw std::runtime_error(path.string() + ": not a RIFF/WAVE file");
  }
  bool format_ok = false;
  for (size_t at = 12; at + 8 <= bytes.size();) {
    const uint32_t size = u32(at + 4);
    if (std::memcmp(bytes.data() + at, "fmt ", 4) == 0) {
      format_ok = u16(at + 8) == 1 && u16(at + 10) == 1 && u32(at + 12) == 16000 && u16(at + 22) == 16;
    } else if (std::memcmp(bytes.data() + at, "data", 4) == 0) {
      if (!format_ok) throw std::runtime_error(path.string() + ": expected 16-bit PCM mono 16 kHz");
      const size_t n = std::min<size_t>(size, bytes.size() - at - 8) / 2;
      std::vector<float> samples(n);
      for (size_t i = 0; i < n; ++i) {
        int16_t s;
        std::memcpy(&s, bytes.data() + at + 8 + 2 * i, 2);
        samples[i] = static_cast<float>(s) / 32768.0f;
      }
      return samples;
    }
    at += 8 + size + (size & 1);
  }
  throw std::runtime_error(path.string() + ": no data chunk");
}

inline const std::shared_ptr<const VadModel>& silero() {
  static const auto model = VadModel::load(shared_path("models/silero-v6.2.0-ggml.bin"));
  return model;
}

inline const std::vector<float>& jfk() {
  static const auto samples = read_wav_s16_mono_16k(shared_path("data/jfk.wav"));
  return samples;
}

// ../shared/reference/jfk-silero-v6.2.0-probs-whispercpp.txt: lines "index probability".
inline std::vector<float> reference_probs() {
  std::ifstream in(shared_path("reference/jfk-silero-v6.2.0-probs-whispercpp.txt"));
  if (!in) throw std::runtime_error("cannot open the reference probabilities");
  std::vector<float> probs;
  size_t index;
  float p;
  while (in >> index >> p) {
    if (index != probs.size()) throw std::runtime_error("reference probabilities out of order");
    probs.push_back(p);
  }
  return probs;
}

}  // namespace earshot::vad::test

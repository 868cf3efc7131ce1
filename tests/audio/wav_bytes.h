// WAV files built byte by byte for the audio tests (any rate, format, chunk layout).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace earshot::audio::testing {

using Bytes = std::vector<uint8_t>;

inline void put16(Bytes& b, uint32_t v) {
  b.push_back(v & 0xFF);
  b.push_back((v >> 8) & 0xFF);
}
inline void put32(Bytes& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}
// Byte by byte: GCC 12 at -O1 (the TSan flavour) warns of an overflow that is not
// there when four bytes are range-inserted into an empty vector.
inline void put_id(Bytes& b, const char* id) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(id[i]));
}
inline void put_float(Bytes& b, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  put32(b, u);
}

struct WavSpec {
  uint16_t tag = 1;
  int channels = 1;
  int rate = 16000;
  int bits = 16;
  bool extensible = false;
  bool junk_before_fmt = false;
  bool odd_chunk_before_data = false;
  int64_t declared_data_size = -1;  // the 'data' chunk's size field; -1: the data's true size
};

// A RIFF/WAVE file around `data`, optionally with unknown chunks (one of odd size, so padded).
// An odd-sized `data` gets no pad byte (as some writers leave it out).
inline Bytes make_wav(const WavSpec& s, const Bytes& data) {
  Bytes chunks;
  if (s.junk_before_fmt) {
    put_id(chunks, "JUNK");
    put32(chunks, 6);
    chunks.insert(chunks.end(), {1, 2, 3, 4, 5, 6});
  }
  put_id(chunks, "fmt ");
  put32(chunks, s.extensible ? 40 : 16);
  put16(chunks, s.extensible ? 0xFFFE : s.tag);
  put16(chunks, s.channels);
  put32(chunks, s.rate);
  put32(chunks, s.rate * s.channels * s.bits / 8);
  put16(chunks, s.channels * s.bits / 8);
  put16(chunks, s.bits);
  if (s.extensible) {
    put16(chunks, 22);
    put16(chunks, s.bits);  // valid bits
    put32(chunks, s.channels == 2 ? 3 : 4);
    put16(chunks, s.tag);
    const uint8_t suffix[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    chunks.insert(chunks.end(), suffix, suffix + 14);
  }
  if (s.odd_chunk_before_data) {
    put_id(chunks, "LIST");
    put32(chunks, 5);
    chunks.insert(chunks.end(), {'I', 'N', 'F', 'O', 'x', 0});  // 5 bytes + 1 pad byte
  }
  put_id(chunks, "data");
  put32(chunks, s.declared_data_size >= 0 ? uint32_t(s.declared_data_size) : uint32_t(data.size()));
  chunks.insert(chunks.end(), data.begin(), data.end());
  Bytes wav;
  put_id(wav, "RIFF");
  put32(wav, uint32_t(chunks.size() + 4));
  put_id(wav, "WAVE");
  wav.insert(wav.end(), chunks.begin(), chunks.end());
  return wav;
}

}  // namespace earshot::audio::testing

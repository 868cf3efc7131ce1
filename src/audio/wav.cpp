#include "audio/wav.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "audio/resample.h"
#include "common/error.h"

namespace earshot::audio {
namespace {

constexpr uint16_t kFormatPcm = 1;
constexpr uint16_t kFormatFloat = 3;
constexpr uint16_t kFormatExtensible = 0xFFFE;
// Sizes of 0xFFFFFFFF mean "unknown" (written by streaming encoders): read to the end.
constexpr uint32_t kUnknownSize = 0xFFFFFFFFu;

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw Error(ErrorCode::kInvalidAudio, name + ": invalid WAV file: " + what);
}

std::string chunk_name(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += (p[i] >= 32 && p[i] < 127) ? char(p[i]) : '?';
  return s;
}

struct Format {
  uint16_t tag = 0;  // PCM or float after resolving WAVE_FORMAT_EXTENSIBLE; other values are unsupported
  int channels = 0;
  int sample_rate = 0;
  int block_align = 0;
  int bits = 0;  // container bits per sample
};

struct Layout {
  Format format;
  size_t data_offset = 0;
  size_t data_size = 0;
  bool size_known = true;  // false: the 'data' size said "until the end" (0xFFFFFFFF)
};

Format parse_fmt(const uint8_t* p, size_t size, const std::string& name) {
  if (size < 16) fail(name, "'fmt ' chunk is " + std::to_string(size) + " bytes, at least 16 expected");
  Format f;
  f.tag = u16(p);
  f.channels = u16(p + 2);
  f.sample_rate = int(u32(p + 4));
  f.block_align = u16(p + 12);
  f.bits = u16(p + 14);
  if (f.tag == kFormatExtensible) {
    if (size < 40) fail(name, "WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk is " + std::to_string(size) + " bytes, 40 expected");
    // The sub-format GUID starts with the plain format tag; the rest is the fixed KSDATAFORMAT suffix.
    static constexpr uint8_t kGuidSuffix[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                                0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    const uint8_t* guid = p + 24;
    f.tag = std::memcmp(guid + 2, kGuidSuffix, sizeof kGuidSuffix) == 0 ? u16(guid) : 0;
  }
  if (f.channels == 0) fail(name, "'fmt ' chunk declares 0 channels");
  if (f.sample_rate <= 0) fail(name, "'fmt ' chunk declares sample rate " + std::to_string(u32(p + 4)));
  check_input_rate(f.sample_rate, name);  // before any sample is read: 8 Hz would be upsampled 2000-fold
  if (f.block_align == 0) fail(name, "'fmt ' chunk declares a block size of 0 bytes");
  return f;
}

bool encoding_supported(const Format& f) {
  if (f.tag == kFormatPcm) return f.bits == 8 || f.bits == 16 || f.bits == 24 || f.bits == 32;
  if (f.tag == kFormatFloat) return f.bits == 32 || f.bits == 64;
  return false;
}

Layout parse_layout(std::span<const uint8_t> whole, const std::string& name, size_t start = 0) {
  // A later file of a concatenation is parsed as a file of its own; offsets are the whole input's.
  const std::span<const uint8_t> b = whole.subspan(start);
  if (b.empty()) fail(name, "the file is empty");
  if (b.size() < 12)
    fail(name, "file ends after " + std::to_string(b.size()) + " bytes, inside the 12-byte RIFF header");
  if (std::memcmp(b.data(), "RIFF", 4) != 0 || std::memcmp(b.data() + 8, "WAVE", 4) != 0)
    fail(name, "no RIFF/WAVE signature");
  std::optional<Format> format;
  size_t pos = 12;
  while (true) {
    if (pos + 8 > b.size()) {
      if (!format) fail(name, "no 'fmt ' chunk before the end of the file at byte " + std::to_string(b.size()));
      fail(name, "no 'data' chunk before the end of the file at byte " + std::to_string(b.size()));
    }
    const uint8_t* h = b.data() + pos;
    const std::string id = chunk_name(h);
    const uint32_t size = u32(h + 4);
    const size_t body = pos + 8;
    const size_t available = b.size() - body;
    if (id == "data") {
      if (!format) fail(name, "'data' chunk at byte " + std::to_string(pos) + " comes before the 'fmt ' chunk");
      Layout layout{*format, body, size};
      if (size == kUnknownSize) {
        layout.data_size = available;
        layout.size_known = false;
      } else if (size > available) {
        fail(name, "truncated: the 'data' chunk declares " + std::to_string(size) + " bytes but only " +
                       std::to_string(available) + " follow");
      }
      layout.data_offset += start;
      return layout;
    }
    if (size > available) {
      fail(name, "truncated: chunk '" + id + "' at byte " + std::to_string(pos) + " declares " + std::to_string(size) +
                     " bytes but only " + std::to_string(available) + " follow");
    }
    if (id == "fmt ") format = parse_fmt(h + 8, size, name);
    pos = body + size + (size & 1);  // chunks are padded to an even size
  }
}

float sample_at(const uint8_t* p, const Format& f) {
  if (f.tag == kFormatFloat) {
    if (f.bits == 32) {
      float v;
      uint32_t u = u32(p);
      std::memcpy(&v, &u, 4);
      return v;
    }
    uint64_t u = uint64_t(u32(p)) | (uint64_t(u32(p + 4)) << 32);
    double v;
    std::memcpy(&v, &u, 8);
    return float(v);
  }
  switch (f.bits) {
    case 8: return (int(p[0]) - 128) / 128.0f;  // 8-bit WAV is unsigned
    case 16: return int16_t(u16(p)) / 32768.0f;
    case 24:
      return float(int32_t((uint32_t(p[0]) << 8) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 24)) / 2147483648.0);
    default: return float(int32_t(u32(p)) / 2147483648.0);
  }
}

// Where the file whose data chunk `layout` describes is followed by another RIFF/WAVE
// file: its offset, else nullopt. After the data chunk (and its pad byte, a zero,
// which some writers leave out) come chunks of the same file (LIST, id3...),
// skipped, until a RIFF header that starts a WAVE file; a chunk running past the
// end ends the search (trailing bytes are ignored, as before). The stream decoder
// walks the same way (stream_decoder.cpp, find_next_wav).
std::optional<size_t> next_wav_file(std::span<const uint8_t> b, const Layout& layout) {
  // 0 and 0xFFFFFFFF are streaming writers' "until the end" (FFmpeg reads them so):
  // what follows is that file's audio, not another file.
  if (!layout.size_known || layout.data_size == 0) return std::nullopt;
  size_t pos = layout.data_offset + layout.data_size;
  if ((layout.data_size & 1) && pos < b.size() && b[pos] == 0) ++pos;
  while (pos + 8 <= b.size()) {
    if (looks_like_wav(b.subspan(pos))) return pos;
    const uint32_t size = u32(b.data() + pos + 4);
    if (size > b.size() - pos - 8) return std::nullopt;
    pos += 8 + size + (size & 1);
  }
  return std::nullopt;
}

PcmAudio decode_layout(std::span<const uint8_t> bytes, const Layout& layout, const std::string& name) {
  const Format& f = layout.format;
  if (!encoding_supported(f)) {
    throw Error(ErrorCode::kUnsupported, name + ": WAV sample encoding (format tag " + std::to_string(f.tag) + ", " +
                                             std::to_string(f.bits) + " bits) is not decoded natively");
  }
  const int bytes_per_sample = f.bits / 8;
  if (f.block_align != bytes_per_sample * f.channels) {
    fail(name, "block size " + std::to_string(f.block_align) + " does not match " + std::to_string(f.channels) +
                   " channels of " + std::to_string(f.bits) + " bits");
  }
  // A trailing partial frame (seen in files cut by hand) carries no complete sample set; it is dropped.
  const size_t frames = layout.data_size / f.block_align;
  PcmAudio out;
  out.sample_rate = f.sample_rate;
  out.channels = f.channels;
  out.interleaved.resize(frames * f.channels);
  const uint8_t* p = bytes.data() + layout.data_offset;
  for (size_t i = 0; i < out.interleaved.size(); ++i, p += bytes_per_sample) {
    out.interleaved[i] = sample_at(p, f);
  }
  if (f.tag == kFormatFloat) {
    // NaN and infinity are no sound: they would reach the model and poison every
    // feature of their window. Only corrupt or hostile files carry them; refused.
    // (A double beyond float's range becomes infinity here and is refused too.)
    for (size_t i = 0; i < out.interleaved.size(); ++i) {
      if (!std::isfinite(out.interleaved[i])) {
        const size_t frame = i / size_t(f.channels);
        char at[48];
        std::snprintf(at, sizeof at, "%.3f", double(frame) / f.sample_rate);
        fail(name, "float sample " + std::to_string(frame) + " (at " + at +
                       " s) is not a finite number (NaN or infinity): the audio is corrupt");
      }
    }
  }
  return out;
}

}  // namespace

bool looks_like_wav(std::span<const uint8_t> b) {
  return b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WAVE", 4) == 0;
}

bool wav_encoding_supported(std::span<const uint8_t> bytes, const std::string& name) {
  return encoding_supported(parse_layout(bytes, name).format);
}

PcmAudio parse_wav(std::span<const uint8_t> bytes, const std::string& name) {
  return decode_layout(bytes, parse_layout(bytes, name), name);
}

std::vector<PcmAudio> parse_wav_files(std::span<const uint8_t> bytes, const std::string& name) {
  std::vector<PcmAudio> files;
  Layout layout = parse_layout(bytes, name);
  while (true) {
    files.push_back(decode_layout(bytes, layout, name));
    const std::optional<size_t> next = next_wav_file(bytes, layout);
    if (!next) return files;
    layout = parse_layout(
        bytes, name + " (WAV file " + std::to_string(files.size() + 1) + ", at byte " + std::to_string(*next) + ")",
        *next);
  }
}

std::vector<float> downmix_to_mono(std::span<const float> interleaved, int channels) {
  if (channels <= 1) return {interleaved.begin(), interleaved.end()};
  const size_t frames = interleaved.size() / channels;
  std::vector<float> mono(frames);
  const float scale = 1.0f / channels;
  for (size_t i = 0; i < frames; ++i) {
    float sum = 0;
    for (int c = 0; c < channels; ++c) sum += interleaved[i * channels + c];
    mono[i] = sum * scale;
  }
  return mono;
}

}  // namespace earshot::audio

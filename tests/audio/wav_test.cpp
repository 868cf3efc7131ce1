// The native WAV reader, downmix, resampler and PCM conversion, on WAV bytes built here.
#include "audio/wav.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "audio/audio.h"
#include "audio/resample.h"
#include "common/error.h"
#include "wav_bytes.h"

namespace earshot::audio {
namespace {

using testing::Bytes;
using testing::make_wav;
using testing::put16;
using testing::put32;
using testing::put_float;
using testing::put_id;
using testing::WavSpec;

ErrorCode code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no earshot::Error thrown";
  return ErrorCode::kInternal;
}

TEST(Wav, Pcm16StereoWithUnknownChunksIsDecodedExactly) {
  Bytes data;
  for (int16_t v : {int16_t(0), int16_t(16384), int16_t(-32768), int16_t(32767), int16_t(-1), int16_t(2)})
    put16(data, uint16_t(v));
  const PcmAudio pcm = parse_wav(
      make_wav({.channels = 2, .rate = 44100, .junk_before_fmt = true, .odd_chunk_before_data = true}, data), "t.wav");
  EXPECT_EQ(pcm.sample_rate, 44100);
  EXPECT_EQ(pcm.channels, 2);
  ASSERT_EQ(pcm.frames(), 3u);
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.0f, 0.5f, -1.0f, 32767 / 32768.0f, -1 / 32768.0f, 2 / 32768.0f}));
}

TEST(Wav, Unsigned8Bit) {
  const PcmAudio pcm = parse_wav(make_wav({.bits = 8}, {128, 0, 255, 192}), "t.wav");
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.0f, -1.0f, 127 / 128.0f, 0.5f}));
}

TEST(Wav, Signed24BitExtensible) {
  // 0x400000 = 0.5, 0x800000 = -1, 0xFFFFFF = -1/2^23
  const Bytes data = {0x00, 0x00, 0x40, 0x00, 0x00, 0x80, 0xFF, 0xFF, 0xFF};
  const PcmAudio pcm = parse_wav(make_wav({.bits = 24, .extensible = true}, data), "t.wav");
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.5f, -1.0f, -1.0f / 8388608.0f}));
}

TEST(Wav, Signed32Bit) {
  Bytes data;
  put32(data, 0x40000000u);
  put32(data, 0x80000000u);
  const PcmAudio pcm = parse_wav(make_wav({.bits = 32}, data), "t.wav");
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.5f, -1.0f}));
}

TEST(Wav, Float32AndFloat64ThreeChannelsExtensible) {
  Bytes f32;
  for (float v : {0.25f, -0.75f, 1.0f}) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    put32(f32, u);
  }
  PcmAudio pcm = parse_wav(make_wav({.tag = 3, .channels = 3, .bits = 32, .extensible = true}, f32), "t.wav");
  EXPECT_EQ(pcm.channels, 3);
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.25f, -0.75f, 1.0f}));

  Bytes f64;
  for (double v : {0.125, -0.5}) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    put32(f64, uint32_t(u));
    put32(f64, uint32_t(u >> 32));
  }
  pcm = parse_wav(make_wav({.tag = 3, .bits = 64}, f64), "t.wav");
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.125f, -0.5f}));
}

TEST(Wav, TrailingPartialFrameIsDropped) {
  const PcmAudio pcm = parse_wav(make_wav({.channels = 2}, {0, 0x40, 0, 0xC0, 0x11}), "t.wav");
  EXPECT_EQ(pcm.interleaved, (std::vector<float>{0.5f, -0.5f}));
}

TEST(Wav, InvalidFilesGivePreciseErrors) {
  const Bytes good = make_wav({}, {1, 0, 2, 0, 3, 0, 4, 0});
  std::string message;

  EXPECT_EQ(code_of([&] { parse_wav({}, "e.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("e.wav"), std::string::npos) << message;
  EXPECT_NE(message.find("empty"), std::string::npos) << message;

  EXPECT_EQ(code_of([&] { parse_wav(Bytes(good.begin(), good.begin() + 7), "t.wav"); }, &message),
            ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("inside the 12-byte RIFF header"), std::string::npos) << message;

  Bytes cut(good.begin(), good.end() - 3);  // data chunk declares 8 bytes, 5 follow
  EXPECT_EQ(code_of([&] { parse_wav(cut, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("truncated: the 'data' chunk declares 8 bytes but only 5 follow"), std::string::npos)
      << message;

  Bytes cut_in_fmt(good.begin(), good.begin() + 30);
  EXPECT_EQ(code_of([&] { parse_wav(cut_in_fmt, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("truncated: chunk 'fmt ' at byte 12 declares 16 bytes but only 10 follow"), std::string::npos)
      << message;

  Bytes no_data(good.begin(), good.begin() + 36);
  EXPECT_EQ(code_of([&] { parse_wav(no_data, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("no 'data' chunk"), std::string::npos) << message;

  Bytes not_riff = good;
  std::memcpy(not_riff.data(), "RIFX", 4);
  EXPECT_EQ(code_of([&] { parse_wav(not_riff, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("no RIFF/WAVE signature"), std::string::npos) << message;

  Bytes data_first;
  put_id(data_first, "RIFF");
  put32(data_first, 16);
  put_id(data_first, "WAVE");
  put_id(data_first, "data");
  put32(data_first, 0);
  EXPECT_EQ(code_of([&] { parse_wav(data_first, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("comes before the 'fmt ' chunk"), std::string::npos) << message;

  Bytes zero_channels = make_wav({.channels = 0}, {});
  EXPECT_EQ(code_of([&] { parse_wav(zero_channels, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("0 channels"), std::string::npos) << message;

  Bytes bad_block = good;
  bad_block[12 + 8 + 12] = 4;  // block align 4 for mono 16-bit
  EXPECT_EQ(code_of([&] { parse_wav(bad_block, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_NE(message.find("block size 4 does not match 1 channels of 16 bits"), std::string::npos) << message;
}

TEST(Wav, NonPcmEncodingsAreLeftToFfmpeg) {
  const Bytes alaw = make_wav({.tag = 6, .bits = 8}, {0xD5, 0x55});
  EXPECT_FALSE(wav_encoding_supported(alaw, "a.wav"));
  EXPECT_EQ(code_of([&] { parse_wav(alaw, "a.wav"); }), ErrorCode::kUnsupported);
  EXPECT_TRUE(wav_encoding_supported(make_wav({}, {0, 0}), "p.wav"));
}

// A file under gtest's temporary folder holding `bytes`.
std::filesystem::path write_temp(const std::string& name, const Bytes& bytes) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

TEST(WavFile, ReadsAFileAsSixteenKilohertzMono) {
  Bytes data;
  for (int i = 0; i < 1600; ++i) {
    put16(data, uint16_t(int16_t(i * 8)));  // left: a ramp
    put16(data, 0);                         // right: silence
  }
  const std::vector<float> at16k = load_wav_file(write_temp("ramp16k.wav", make_wav({.channels = 2}, data)));
  ASSERT_EQ(at16k.size(), 1600u);
  for (int i = 0; i < 1600; ++i) ASSERT_EQ(at16k[i], 0.5f * float(i * 8) / 32768.0f) << i;
  // 8 kHz input: resampled to twice as many samples.
  const std::vector<float> at8k =
      load_wav_file(write_temp("ramp8k.wav", make_wav({.channels = 2, .rate = 8000}, data)));
  EXPECT_NEAR(double(at8k.size()), 3200.0, 2.0);
}

TEST(WavFile, ErrorsNameTheFileAndTheProblem) {
  auto expect_error = [](const std::filesystem::path& path, ErrorCode code, const std::string& needle) {
    std::string message;
    EXPECT_EQ(code_of([&] { load_wav_file(path); }, &message), code) << message;
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  };
  expect_error(std::filesystem::path(::testing::TempDir()) / "no-such.wav", ErrorCode::kIo, "no such file");
  expect_error(::testing::TempDir(), ErrorCode::kIo, "is a directory");
  expect_error(write_temp("empty.wav", {}), ErrorCode::kInvalidAudio, "empty");
  expect_error(write_temp("tags.mp3", {'I', 'D', '3', 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}), ErrorCode::kInvalidAudio,
               "not a WAV file");
  expect_error(write_temp("alaw.wav", make_wav({.tag = 6, .bits = 8}, {0xD5, 0x55})), ErrorCode::kUnsupported,
               "needs FFmpeg");
  Bytes truncated = make_wav({}, {1, 2, 3, 4, 5, 6});
  truncated.resize(30);
  expect_error(write_temp("truncated.wav", truncated), ErrorCode::kInvalidAudio, "");
}

TEST(Downmix, AveragesChannels) {
  EXPECT_EQ(downmix_to_mono(std::vector<float>{1.0f, 0.0f, -0.5f, 0.5f, 0.25f, 0.75f}, 2),
            (std::vector<float>{0.5f, 0.0f, 0.5f}));
  EXPECT_EQ(downmix_to_mono(std::vector<float>{0.3f, 0.6f, 0.9f}, 3), (std::vector<float>{0.6f}));
}

TEST(PcmS16le, ConvertsLittleEndianSamples) {
  const std::vector<uint8_t> bytes = {0x00, 0x40, 0x00, 0x80, 0xFF, 0x7F, 0x01};
  EXPECT_EQ(pcm_s16le_to_float(bytes), (std::vector<float>{0.5f, -1.0f, 32767 / 32768.0f}));
  EXPECT_TRUE(pcm_s16le_to_float({}).empty());
}

std::vector<float> sine(double freq, int rate, size_t n, double amplitude = 0.5) {
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = float(amplitude * std::sin(2 * std::numbers::pi * freq * double(i) / rate));
  return s;
}

// Power of `signal` relative to the best-fitting sine/cosine pair at `freq`, in dB of residual.
double residual_db(const std::vector<float>& x, double freq, size_t begin, size_t end) {
  double ss = 0, cc = 0, sc = 0, xs = 0, xc = 0, xx = 0;
  for (size_t i = begin; i < end; ++i) {
    const double s = std::sin(2 * std::numbers::pi * freq * double(i) / kSampleRate);
    const double c = std::cos(2 * std::numbers::pi * freq * double(i) / kSampleRate);
    ss += s * s, cc += c * c, sc += s * c, xs += x[i] * s, xc += x[i] * c, xx += double(x[i]) * x[i];
  }
  const double det = ss * cc - sc * sc;
  const double a = (xs * cc - xc * sc) / det, b = (xc * ss - xs * sc) / det;
  double residual = 0;
  for (size_t i = begin; i < end; ++i) {
    const double fit = a * std::sin(2 * std::numbers::pi * freq * double(i) / kSampleRate) +
                       b * std::cos(2 * std::numbers::pi * freq * double(i) / kSampleRate);
    residual += (x[i] - fit) * (x[i] - fit);
  }
  return 10 * std::log10(residual / xx);
}

double rms(const std::vector<float>& x, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += double(x[i]) * x[i];
  return std::sqrt(sum / double(end - begin));
}

TEST(Resample, SixteenKilohertzPassesThroughUnchanged) {
  const std::vector<float> in = sine(440, 16000, 1000);
  EXPECT_EQ(resample_to_16k(in, 16000), in);
}

TEST(Resample, KeepsInBandTonesCleanAndTheirLevel) {
  for (int rate : {8000, 22050, 44100, 48000}) {
    const std::vector<float> out = resample_to_16k(sine(1000, rate, size_t(rate)), rate);
    EXPECT_NEAR(double(out.size()), 16000.0, 1.0) << rate;
    // Away from the edges (filter start-up) the output is the same 1 kHz sine: residual below -60 dB.
    EXPECT_LT(residual_db(out, 1000, 400, 15600), -60.0) << rate;
    EXPECT_NEAR(rms(out, 400, 15600), 0.5 / std::sqrt(2.0), 0.005) << rate;
  }
}

TEST(Resample, RemovesTonesAboveTheNewNyquist) {
  // 11 kHz cannot exist at 16 kHz; a naive resampler would alias it to 5 kHz.
  const std::vector<float> out = resample_to_16k(sine(11000, 48000, 48000), 48000);
  EXPECT_LT(20 * std::log10(rms(out, 400, 15600) / (0.5 / std::sqrt(2.0))), -60.0);
}

TEST(Resample, StreamingInPiecesEqualsWholeBuffer) {
  const std::vector<float> in = sine(700, 44100, 44100);
  Resampler resampler(44100);
  std::vector<float> pieces;
  for (size_t pos = 0; pos < in.size(); pos += 1234)
    resampler.push(std::span(in).subspan(pos, std::min<size_t>(1234, in.size() - pos)), pieces);
  resampler.flush(pieces);
  EXPECT_EQ(pieces, resample_to_16k(in, 44100));
}

TEST(Resample, RejectsAbsurdRates) {
  EXPECT_EQ(code_of([] { Resampler r(0); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(code_of([] { Resampler r(-44100); }), ErrorCode::kInvalidAudio);
  std::string message;
  EXPECT_EQ(code_of([] { Resampler r(8); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_EQ(message,
            "sample rate 8 Hz is below the lowest earshot takes, 8000 Hz (send audio at 8-48 kHz; 16 kHz "
            "needs no resampling)");
  EXPECT_EQ(code_of([] { Resampler r(kMinInputSampleRate - 1); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(code_of([] { Resampler r(kMaxInputSampleRate + 1); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_EQ(message, "sample rate 1000001 Hz is above the highest earshot takes, 1000000 Hz");
  EXPECT_EQ(Resampler(kMinInputSampleRate).input_rate(), 8000);
  EXPECT_EQ(Resampler(kMaxInputSampleRate).input_rate(), 1000000);
}

// What callers with an output limit check before pushing: never less than push() appends.
TEST(Resample, MaxOutputBoundsWhatPushAndFlushAppend) {
  for (int rate : {8000, 11025, 16000, 22050, 44100, 48000, 96000}) {
    Resampler resampler(rate);
    std::vector<float> out;
    size_t pushed = 0;
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(160), size_t(4096), size_t(65535), size_t(3)}) {
      const size_t bound = resampler.max_output(n);
      const size_t before = out.size();
      resampler.push(sine(440, rate, n), out);
      pushed += n;
      EXPECT_LE(out.size() - before, bound) << rate << " Hz, " << n << " samples";
      // From 8 kHz up, an input sample makes at most two (and the filter's delay line).
      EXPECT_LE(bound, 2 * n + 256) << rate << " Hz, " << n << " samples";
    }
    const size_t bound = resampler.max_output(0);
    const size_t before = out.size();
    resampler.flush(out);
    EXPECT_LE(out.size() - before, bound) << rate;
    EXPECT_NEAR(double(out.size()), double(pushed) * kSampleRate / rate, 2.0) << rate;
  }
  // Beyond what swr_get_out_samples counts (int), the bound is the rate ratio plus the delay line.
  EXPECT_GE(Resampler(8000).max_output(size_t(1) << 32), size_t(2) << 32);
  EXPECT_LE(Resampler(8000).max_output(size_t(1) << 32), (size_t(2) << 32) + 1024);
}

TEST(Wav, RatesBelowEightKilohertzAreRefusedBeforeAnySampleIsRead) {
  std::string message;
  // 64 KB at 8 Hz: upsampled 2000-fold this made 1.3 GB of samples.
  const Bytes tiny_rate = make_wav({.rate = 8, .bits = 8}, Bytes(65536, 128));
  EXPECT_EQ(code_of([&] { parse_wav(tiny_rate, "t.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_EQ(message,
            "t.wav: sample rate 8 Hz is below the lowest earshot takes, 8000 Hz (send audio at 8-48 kHz; 16 kHz needs "
            "no resampling)");
  // The header alone refuses it: load_file's format check reads no sample.
  EXPECT_EQ(code_of([&] { wav_encoding_supported(tiny_rate, "t.wav"); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(code_of([&] { load_wav_file(write_temp("8hz.wav", tiny_rate)); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(code_of([&] { parse_wav(make_wav({.rate = 7999}, {0, 0}), "t.wav"); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(code_of([&] { parse_wav(make_wav({.rate = 1'000'001}, {0, 0}), "t.wav"); }), ErrorCode::kInvalidAudio);
  EXPECT_EQ(parse_wav(make_wav({.rate = 8000}, {0, 0}), "t.wav").sample_rate, 8000);
}

TEST(Wav, FloatSamplesThatAreNotFiniteAreRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    Bytes data;
    for (float v : {0.25f, -0.5f, 0.125f, bad, 0.0f, 0.0f}) put_float(data, v);
    std::string message;
    EXPECT_EQ(code_of([&] { parse_wav(make_wav({.tag = 3, .channels = 2, .rate = 8000, .bits = 32}, data), "f.wav"); },
                      &message),
              ErrorCode::kInvalidAudio);
    EXPECT_EQ(message,
              "f.wav: invalid WAV file: float sample 1 (at 0.000 s) is not a finite number (NaN or infinity): the "
              "audio is corrupt");
  }
  // A double beyond float's range would be an infinity as a float: refused too.
  Bytes f64;
  for (double v : {0.5, 1e300}) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    put32(f64, uint32_t(u));
    put32(f64, uint32_t(u >> 32));
  }
  EXPECT_EQ(code_of([&] { parse_wav(make_wav({.tag = 3, .bits = 64}, f64), "d.wav"); }), ErrorCode::kInvalidAudio);
  // Loud but finite float audio ("overs" past full scale) is audio: kept as it is.
  Bytes loud;
  put_float(loud, 1.5f);
  EXPECT_EQ(parse_wav(make_wav({.tag = 3, .bits = 32}, loud), "l.wav").interleaved, std::vector<float>{1.5f});
}

// Clients that send each recorded chunk as a WAV file of its own: each is decoded,
// with the chunks between them (LIST after 'data', a missing pad byte) skipped.
TEST(Wav, WavFilesBackToBackAreEachDecoded) {
  const Bytes first = make_wav({.rate = 16000, .bits = 8}, {128, 192, 64});  // odd size, no pad byte
  Bytes second_data;
  for (int16_t v : {int16_t(1000), int16_t(-1000), int16_t(2000), int16_t(-2000)}) put16(second_data, uint16_t(v));
  const Bytes second = make_wav({.channels = 2, .rate = 8000}, second_data);
  Bytes list;
  put_id(list, "LIST");
  put32(list, 4);
  put_id(list, "INFO");
  Bytes both = first;
  both.push_back(0);  // the pad byte after the odd 'data' chunk
  both.insert(both.end(), list.begin(), list.end());
  both.insert(both.end(), second.begin(), second.end());
  Bytes unpadded = first;  // a writer that leaves the pad byte out, then no chunk in between
  unpadded.insert(unpadded.end(), second.begin(), second.end());

  const std::vector<PcmAudio> files = parse_wav_files(both, "b.wav");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].interleaved, (std::vector<float>{0.0f, 0.5f, -0.5f}));
  EXPECT_EQ(files[1].sample_rate, 8000);
  EXPECT_EQ(files[1].channels, 2);
  EXPECT_EQ(files[1].interleaved, parse_wav(second, "s.wav").interleaved);
  EXPECT_EQ(parse_wav(both, "b.wav").interleaved, files[0].interleaved);  // parse_wav reads the first

  // As 16 kHz mono: each file resampled from its own rate, one after the other.
  std::vector<float> expected = wav_to_16k_mono(first, "f.wav");
  const std::vector<float> tail = wav_to_16k_mono(second, "s.wav");
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(wav_to_16k_mono(both, "b.wav"), expected);
  EXPECT_EQ(wav_to_16k_mono(unpadded, "u.wav"), expected);
  EXPECT_EQ(load_wav_file(write_temp("both.wav", both)), expected);

  // Bytes after the last file that start no WAVE file are ignored, as after a single file.
  Bytes trailing = both;
  for (const char* junk : {"JUNKJUNK", "\x01\x02\x03"}) trailing.insert(trailing.end(), junk, junk + std::strlen(junk));
  EXPECT_EQ(parse_wav_files(trailing, "t.wav").size(), 2u);
  // A 'data' size of 0xFFFFFFFF runs to the end: what follows is its data, not a file.
  Bytes unknown = make_wav({.bits = 8, .declared_data_size = 0xFFFFFFFF}, {128, 128});
  unknown.insert(unknown.end(), second.begin(), second.end());
  const std::vector<PcmAudio> one = parse_wav_files(unknown, "u.wav");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].frames(), 2 + second.size());
  Bytes zero = make_wav({.bits = 8, .declared_data_size = 0}, {});  // 0: "until the end" too
  zero.insert(zero.end(), second.begin(), second.end());
  EXPECT_EQ(parse_wav_files(zero, "z.wav").size(), 1u);
  // A second file is checked like the first, and its errors say which it is.
  Bytes bad = first;
  const Bytes slow = make_wav({.rate = 8}, {0, 0});
  bad.insert(bad.end(), slow.begin(), slow.end());
  std::string message;
  EXPECT_EQ(code_of([&] { parse_wav_files(bad, "x.wav"); }, &message), ErrorCode::kInvalidAudio);
  EXPECT_EQ(message.rfind("x.wav (WAV file 2, at byte 47): sample rate 8 Hz is below", 0), 0u) << message;
}

}  // namespace
}  // namespace earshot::audio

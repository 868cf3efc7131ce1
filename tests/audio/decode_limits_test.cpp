// What decoding may cost: input rates below 8 kHz refused where they enter, output
// limits checked before samples are made (a small compressed file of silence that
// decodes to hours), NaN and infinity refused, and WAV files back to back decoded
// one after the other. The allocation probe (tests/support) sees every buffer
// earshot's code allocates.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "../support/allocation_probe.h"
#include "audio/audio.h"
#include "audio/wav.h"
#include "clips.h"
#include "common/error.h"
#include "wav_bytes.h"

namespace earshot::audio {
namespace {

using earshot::testing::allocation_figures;
using earshot::testing::reset_allocation_figures;
using testing::Bytes;
using testing::make_generated_clip;
using testing::make_wav;
using testing::put16;
using testing::put_float;
using testing::read_bytes;

constexpr size_t kMiB = size_t(1) << 20;

std::vector<float> decode_whole(std::span<const uint8_t> bytes) {
  auto decoder = StreamDecoder::create();
  std::vector<float> out = decoder->push(bytes);
  const std::vector<float> tail = decoder->finish();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

std::vector<float> decode_in_pieces(std::span<const uint8_t> bytes, uint32_t seed, size_t max_piece) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, max_piece);
  auto decoder = StreamDecoder::create();
  std::vector<float> out;
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t n = std::min(size(rng), bytes.size() - pos);
    const std::vector<float> piece = decoder->push(bytes.subspan(pos, n));
    out.insert(out.end(), piece.begin(), piece.end());
    pos += n;
  }
  const std::vector<float> tail = decoder->finish();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// The error a whole stream decodes to (kInternal and no message when none).
Error error_of_stream(std::span<const uint8_t> bytes) {
  try {
    decode_whole(bytes);
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorCode::kInternal, "");
}

// The probe: an 8 Hz 8-bit WAV of 64 KB was upsampled 2000-fold to 1.3 GB
// before any limit looked at it. The header is refused before a sample is decoded.
TEST(DecodeLimits, AWavHeaderBelowEightKilohertzIsRefusedBeforeDecoding) {
  const Bytes wav = make_wav({.rate = 8, .bits = 8}, Bytes(65536, 100));
  reset_allocation_figures();
  const Error e = error_of_stream(wav);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio);
  EXPECT_STREQ(e.what(),
               "audio stream (wav): sample rate 8 Hz is below the lowest earshot takes, 8000 Hz (send audio at 8-48 "
               "kHz; 16 kHz needs no resampling)");
  // The input's own copy (64 KB) is the largest buffer; 1.3 GB were made before.
  EXPECT_GT(allocation_figures().largest, 0u);  // the probe sees the decoder's buffers
  EXPECT_LT(allocation_figures().largest, kMiB);
  EXPECT_LT(allocation_figures().total, 4 * kMiB);

  EXPECT_EQ(error_of_stream(make_wav({.rate = 7999}, Bytes(8000, 0))).code(), ErrorCode::kInvalidAudio);
  EXPECT_NEAR(double(decode_whole(make_wav({.rate = 8000}, Bytes(16000, 0))).size()), 16000.0, 2.0);
  // A WAV that only FFmpeg decodes (A-law) is refused on its header the same way.
  EXPECT_NE(std::string(error_of_stream(make_wav({.tag = 6, .rate = 8, .bits = 8}, Bytes(4096, 0xD5))).what())
                .find("sample rate 8 Hz is below the lowest earshot takes"),
            std::string::npos);
}

TEST(DecodeLimits, LoadFileRefusesLowRatesOfEveryFormat) {
  const std::filesystem::path dir = testing::clip_dir();
  std::filesystem::create_directories(dir);
  for (const auto& [name, wav] : {std::pair<std::string, Bytes>{"pcm_8hz.wav", make_wav({.rate = 8}, Bytes(512, 0))},
                                  {"alaw_8hz.wav", make_wav({.tag = 6, .rate = 8, .bits = 8}, Bytes(512, 0xD5))}}) {
    const std::filesystem::path path = dir / name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(wav.data()), std::streamsize(wav.size()));
    try {
      load_file(path);
      ADD_FAILURE() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio) << e.what();
      EXPECT_NE(std::string(e.what()).find("sample rate 8 Hz is below"), std::string::npos) << e.what();
    }
  }
}

// 51 KB of FLAC (an hour of silence, 16384-sample frames) decode to 230 MB of
// samples. With a limit the decoder stops at the first frame past it.
TEST(DecodeLimits, AnOutputLimitStopsADecompressionBombBeforeItsSamplesAreMade) {
  const std::vector<uint8_t> bomb = read_bytes(
      make_generated_clip("silence_1h.flac", "anullsrc=r=16000:cl=mono", "-t 3600 -c:a flac -frame_size 16384"));
  ASSERT_LT(bomb.size(), 64 * 1024u);
  const size_t limit = 60 * kSampleRate;  // a minute
  reset_allocation_figures();
  auto decoder = StreamDecoder::create();
  decoder->set_output_limit(limit);
  try {
    decoder->push(bomb);
    ADD_FAILURE() << "no error";
  } catch (const OutputLimitExceeded& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio);
    EXPECT_EQ(e.limit(), limit);
    EXPECT_STREQ(e.what(),
                 "the input decodes to more than 60.0 s of audio, the most one piece of input may decode to "
                 "here");
  }
  // Every buffer stayed within a few times the limit (3.7 MB of floats); decoding
  // everything would have made 230 MB.
  EXPECT_LT(allocation_figures().largest, 3 * limit * sizeof(float));
  EXPECT_LT(allocation_figures().total, 8 * limit * sizeof(float));
  // The stream is failed from then on, without decoding further.
  EXPECT_THROW(decoder->push(bomb), OutputLimitExceeded);
  EXPECT_THROW(decoder->finish(), OutputLimitExceeded);
}

// The limit is per push() (or finish()), so a stream of any length passes in
// pieces that each decode to less, with the same samples as without a limit.
TEST(DecodeLimits, TheLimitCountsEachPushAlone) {
  const std::vector<uint8_t> wav = read_bytes(testing::jfk_wav());  // 11 s, 16 kHz s16
  const std::vector<float> whole = decode_whole(wav);
  ASSERT_EQ(whole.size(), 176000u);

  // Pieces of 30000 bytes (0.94 s); the first output comes after FFmpeg's stream
  // analysis has read 128 KiB (4.6 s), so a push returns up to that much at once.
  auto decoder = StreamDecoder::create();
  decoder->set_output_limit(5 * kSampleRate);
  std::vector<float> out;
  for (size_t pos = 0; pos < wav.size(); pos += 30000) {
    const std::vector<float> piece =
        decoder->push(std::span(wav).subspan(pos, std::min<size_t>(30000, wav.size() - pos)));
    EXPECT_LE(piece.size(), 5u * kSampleRate);
    out.insert(out.end(), piece.begin(), piece.end());
  }
  const std::vector<float> tail = decoder->finish();
  out.insert(out.end(), tail.begin(), tail.end());
  EXPECT_EQ(out, whole);

  // One push of the whole file against a limit just under it, then just at it.
  auto under = StreamDecoder::create();
  under->set_output_limit(175999);
  EXPECT_THROW(under->push(wav), OutputLimitExceeded);
  auto at = StreamDecoder::create();
  at->set_output_limit(176000);
  std::vector<float> all = at->push(wav);
  at->set_output_limit(176000 - all.size());
  const std::vector<float> rest = at->finish();
  all.insert(all.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, whole);
}

// Each WAV file of a stream sent back to back is decoded, whatever the cuts, as
// the files decoded one by one; load_file reads such a file the same way.
TEST(DecodeLimits, WavFilesBackToBackAreEachDecoded) {
  const std::vector<uint8_t> jfk = read_bytes(testing::jfk_wav());
  const std::vector<uint8_t> stereo =
      read_bytes(testing::make_clip("jfk_44k_stereo.wav", "-af 'pan=stereo|c0=c0|c1=c0' -ar 44100"));
  Bytes odd;  // 8 kHz 8-bit of an odd size: a pad byte follows, then a LIST chunk of the same file
  for (int i = 0; i < 8001; ++i) odd.push_back(uint8_t(128 + 100 * std::sin(i * 0.05)));
  Bytes odd_wav = make_wav({.rate = 8000, .bits = 8}, odd);
  odd_wav.push_back(0);
  for (const char* c : {"LIST", "\x04\x00\x00\x00", "INFO"}) odd_wav.insert(odd_wav.end(), c, c + 4);

  Bytes stream = jfk;
  for (const Bytes& next : {Bytes(stereo.begin(), stereo.end()), odd_wav, jfk})
    stream.insert(stream.end(), next.begin(), next.end());

  std::vector<float> expected;
  for (const Bytes& file : {jfk, Bytes(stereo.begin(), stereo.end()), odd_wav, jfk}) {
    const std::vector<float> part = decode_whole(file);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  EXPECT_GT(expected.size(), 3 * 176000u);
  EXPECT_EQ(decode_whole(stream), expected);
  for (uint32_t seed : {1u, 2u}) EXPECT_EQ(decode_in_pieces(stream, seed, 9000), expected) << "seed " << seed;

  const std::filesystem::path path = testing::clip_dir() / "four_wavs.wav";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(stream.data()), std::streamsize(stream.size()));
  EXPECT_EQ(load_file(path), expected);

  // A later file may be empty (a client's last chunk); the first may not.
  Bytes with_empty = jfk;
  const Bytes empty = make_wav({}, {0});  // one byte: no whole sample
  with_empty.insert(with_empty.end(), empty.begin(), empty.end());
  EXPECT_EQ(decode_whole(with_empty), decode_whole(jfk));
  EXPECT_EQ(error_of_stream(empty).code(), ErrorCode::kInvalidAudio);
}

TEST(DecodeLimits, FloatSamplesThatAreNotFiniteAreRefused) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Bytes data;
    for (int i = 0; i < 16000; ++i) put_float(data, i == 12345 ? bad : 0.1f);
    const Error e = error_of_stream(make_wav({.tag = 3, .bits = 32}, data));
    EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio);
    EXPECT_STREQ(e.what(),
                 "audio stream (wav): float sample 12345 (at 0.772 s) is not a finite number (NaN or "
                 "infinity): the audio is corrupt");
  }
}

}  // namespace
}  // namespace earshot::audio

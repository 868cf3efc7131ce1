// G.711 expansion against an encoder written from the standard's segment rule,
// and the raw decoders: any split of the bytes gives the same samples, channels
// come apart (or mix down) as interleaved, every rate comes out at 16 kHz.
#include "audio/raw_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <vector>

#include "audio/g711.h"
#include "common/error.h"

namespace earshot::audio {
namespace {

// µ-law encoding (ITU-T G.711): bias 0x84, clip at 32635, the segment is the
// highest set bit of the biased magnitude, 4 mantissa bits below it, all inverted.
uint8_t mulaw_encode(int pcm) {
  const int sign = pcm < 0 ? 0x80 : 0;
  int magnitude = std::min(std::abs(pcm), 32635) + 0x84;
  int exponent = 7;
  for (int mask = 0x4000; (magnitude & mask) == 0 && exponent > 0; mask >>= 1) --exponent;
  const int mantissa = (magnitude >> (exponent + 3)) & 0x0F;
  return static_cast<uint8_t>(~(sign | (exponent << 4) | mantissa));
}

// A-law encoding: 13-bit magnitude (one's complement for negatives), segments
// ending at 0x1F, 0x3F ... 0xFFF, 4 mantissa bits, even bits inverted (0x55).
uint8_t alaw_encode(int pcm) {
  int mask = 0xD5;
  if (pcm < 0) {
    mask = 0x55;
    pcm = -pcm - 1;
  }
  const int v = pcm >> 3;
  const int ends[8] = {0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF};
  int seg = 0;
  while (seg < 8 && v > ends[seg]) ++seg;
  if (seg >= 8) return static_cast<uint8_t>(0x7F ^ mask);
  int value = seg << 4;
  value |= seg < 2 ? (v >> 1) & 0x0F : (v >> seg) & 0x0F;
  return static_cast<uint8_t>(value ^ mask);
}

TEST(G711, KnownCodes) {
  EXPECT_EQ(mulaw_to_linear(0xFF), 0);
  EXPECT_EQ(mulaw_to_linear(0x7F), 0);  // negative zero
  EXPECT_EQ(mulaw_to_linear(0x00), -32124);
  EXPECT_EQ(mulaw_to_linear(0x80), 32124);
  EXPECT_EQ(mulaw_to_linear(0xFE), 8);
  EXPECT_EQ(alaw_to_linear(0xD5), 8);
  EXPECT_EQ(alaw_to_linear(0x55), -8);
  EXPECT_EQ(alaw_to_linear(0xAA), 32256);
  EXPECT_EQ(alaw_to_linear(0x2A), -32256);
  EXPECT_FLOAT_EQ(g711_to_float(0x80, G711Law::kMu), 32124.0f / 32768.0f);
}

TEST(G711, EveryCodeEncodesBackToItself) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if (byte != 0x7F) {
      EXPECT_EQ(mulaw_encode(mulaw_to_linear(byte)), byte) << "mu-law code " << b;
    }
    EXPECT_EQ(alaw_encode(alaw_to_linear(byte)), byte) << "A-law code " << b;
  }
}

// An encoded sample decodes to one of the two levels around it (the quantiser never
// skips a level); a level itself decodes to itself.
TEST(G711, EncodedSamplesDecodeToALevelAroundThem) {
  for (G711Law law : {G711Law::kMu, G711Law::kA}) {
    std::set<int> levels;
    for (int b = 0; b < 256; ++b) levels.insert(g711_to_linear(static_cast<uint8_t>(b), law));
    const int clip = law == G711Law::kMu ? 32124 : 32256;
    for (int x = -clip; x <= clip; ++x) {
      const uint8_t code = law == G711Law::kMu ? mulaw_encode(x) : alaw_encode(x);
      const int decoded = g711_to_linear(code, law);
      auto above = levels.lower_bound(x);
      const int high = *above;
      const int low = *above == x || above == levels.begin() ? *above : *std::prev(above);
      ASSERT_TRUE(decoded == low || decoded == high) << (law == G711Law::kMu ? "mu" : "A") << "-law x=" << x
                                                     << " decoded " << decoded << " between " << low << " and " << high;
    }
  }
}

TEST(RawEncoding, Names) {
  EXPECT_EQ(raw_encoding("MULAW"), RawEncoding::kMulaw);
  EXPECT_EQ(raw_encoding("alaw"), RawEncoding::kAlaw);
  EXPECT_EQ(raw_encoding("linear16"), RawEncoding::kLinear16);
  EXPECT_FALSE(raw_encoding("opus"));
  EXPECT_STREQ(raw_encoding_name(RawEncoding::kAlaw), "alaw");
}

// A 440 Hz tone per channel (channel c at (c + 1) x 440 Hz), encoded as `encoding`, interleaved.
std::vector<uint8_t> tone_bytes(RawEncoding encoding, int rate, int channels, int frames) {
  std::vector<uint8_t> out;
  for (int i = 0; i < frames; ++i)
    for (int c = 0; c < channels; ++c) {
      const int s = static_cast<int>(std::lround(8000 * std::sin(2 * M_PI * 440.0 * (c + 1) * i / rate)));
      if (encoding == RawEncoding::kLinear16) {
        out.push_back(static_cast<uint8_t>(s & 0xFF));
        out.push_back(static_cast<uint8_t>((s >> 8) & 0xFF));
      } else {
        out.push_back(encoding == RawEncoding::kMulaw ? mulaw_encode(s) : alaw_encode(s));
      }
    }
  return out;
}

void joined(std::vector<std::vector<float>>& into, const std::vector<std::vector<float>>& more) {
  if (into.empty()) into.resize(more.size());
  for (size_t c = 0; c < more.size(); ++c) into[c].insert(into[c].end(), more[c].begin(), more[c].end());
}

TEST(RawChannelsDecoder, AnySplitGivesTheSameSamples) {
  for (RawEncoding encoding : {RawEncoding::kLinear16, RawEncoding::kMulaw, RawEncoding::kAlaw}) {
    const std::vector<uint8_t> bytes = tone_bytes(encoding, 8000, 2, 4000);
    RawChannelsDecoder whole(encoding, 8000, 2);
    std::vector<std::vector<float>> expected;
    joined(expected, whole.push(bytes));
    joined(expected, whole.finish());
    for (size_t piece : {1u, 3u, 7u, 250u}) {
      RawChannelsDecoder split(encoding, 8000, 2);
      std::vector<std::vector<float>> got;
      for (size_t i = 0; i < bytes.size(); i += piece)
        joined(got, split.push(std::span(bytes).subspan(i, std::min(piece, bytes.size() - i))));
      joined(got, split.finish());
      ASSERT_EQ(got, expected) << raw_encoding_name(encoding) << " in pieces of " << piece;
    }
    // 0.5 s at 8 kHz is 0.5 s at 16 kHz.
    ASSERT_EQ(expected.size(), 2u);
    EXPECT_NEAR(static_cast<double>(expected[0].size()), 8000.0, 2.0);
  }
}

TEST(RawChannelsDecoder, ChannelsComeApartAsEachAlone) {
  const int frames = 1600;
  const std::vector<uint8_t> stereo = tone_bytes(RawEncoding::kMulaw, 8000, 2, frames);
  RawChannelsDecoder both(RawEncoding::kMulaw, 8000, 2);
  std::vector<std::vector<float>> channels;
  joined(channels, both.push(stereo));
  joined(channels, both.finish());
  for (int c = 0; c < 2; ++c) {
    std::vector<uint8_t> alone;
    for (int i = 0; i < frames; ++i) alone.push_back(stereo[static_cast<size_t>(i * 2 + c)]);
    RawChannelsDecoder mono(RawEncoding::kMulaw, 8000, 1);
    std::vector<std::vector<float>> expected;
    joined(expected, mono.push(alone));
    joined(expected, mono.finish());
    EXPECT_EQ(channels[static_cast<size_t>(c)], expected[0]) << "channel " << c;
  }
}

TEST(RawDecoder, MixesChannelsDownToTheirMean) {
  // 16 kHz passes through the resampler untouched, so the mean is exact.
  const std::vector<uint8_t> stereo = tone_bytes(RawEncoding::kLinear16, 16000, 2, 320);
  RawDecoder mixed(RawEncoding::kLinear16, 16000, 2);
  std::vector<float> got = mixed.push(stereo);
  ASSERT_EQ(got.size(), 320u);
  for (size_t i = 0; i < got.size(); ++i) {
    auto at = [&](size_t c) {
      const size_t k = (i * 2 + c) * 2;
      return static_cast<float>(static_cast<int16_t>(stereo[k] | (stereo[k + 1] << 8))) / 32768.0f;
    };
    ASSERT_FLOAT_EQ(got[i], (at(0) + at(1)) * 0.5f) << i;
  }
  // A G.711 byte at 16 kHz is its expansion.
  RawDecoder alaw(RawEncoding::kAlaw, 16000);
  const std::vector<uint8_t> one{0xAA, 0x2A, 0xD5};
  EXPECT_EQ(alaw.push(one), (std::vector<float>{32256 / 32768.0f, -32256 / 32768.0f, 8 / 32768.0f}));
}

TEST(RawDecoder, RefusesChannelCountsAndRatesItCannotTake) {
  for (int channels : {0, 65}) {
    try {
      RawDecoder d(RawEncoding::kMulaw, 8000, channels);
      FAIL() << channels << " channels accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio);
      EXPECT_NE(std::string(e.what()).find("channel"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(RawChannelsDecoder(RawEncoding::kLinear16, 0, 1), Error);
}

}  // namespace
}  // namespace earshot::audio

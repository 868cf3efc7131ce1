// load_file and StreamDecoder on clips of every supported container, made with ffmpeg from jfk.wav.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "audio/audio.h"
#include "audio/wav.h"
#include "clips.h"
#include "common/error.h"

namespace earshot::audio {
namespace {

using testing::best_match;
using testing::jfk_wav;
using testing::make_clip;
using testing::read_bytes;

const std::vector<float>& original() {
  static const std::vector<float> samples = [] {
    const std::vector<uint8_t> bytes = read_bytes(jfk_wav());
    const PcmAudio pcm = parse_wav(bytes, "jfk.wav");  // 16 kHz mono s16
    return pcm.interleaved;
  }();
  return samples;
}

TEST(LoadFile, Jfk16kMonoWavIsBitExact) {
  const std::vector<float> samples = load_file(jfk_wav());
  ASSERT_EQ(samples.size(), 176000u);  // 11.0 s
  EXPECT_EQ(samples, original());
}

struct Clip {
  const char* file;
  const char* ffmpeg_args;
  double min_snr_db;  // against jfk.wav, after alignment
  double min_correlation;
  int max_length_error;  // samples of 16 kHz audio
};

void PrintTo(const Clip& c, std::ostream* os) { *os << c.file; }

class ClipTest : public ::testing::TestWithParam<Clip> {};

TEST_P(ClipTest, LoadFileMatchesOriginal) {
  const Clip& clip = GetParam();
  const std::vector<float> samples = load_file(make_clip(clip.file, clip.ffmpeg_args));
  const auto m = best_match(original(), samples, 800);
  std::printf("%s: %zu samples, lag %d, correlation %.5f, SNR %.1f dB\n", clip.file, samples.size(), m.lag,
              m.correlation, m.snr_db);
  EXPECT_LE(std::abs(long(samples.size()) - 176000L), clip.max_length_error);
  EXPECT_GE(m.correlation, clip.min_correlation);
  EXPECT_GE(m.snr_db, clip.min_snr_db);
  EXPECT_EQ(m.lag, 0);  // decoders remove codec delay (opus pre-skip, mp3 LAME tag, aac edit list)
}

INSTANTIATE_TEST_SUITE_P(
    Formats, ClipTest,
    // Lossless clips must match bit for bit (SNR of an exact match is reported as ~335 dB); lossy ones
    // within what their codec allows at these bit rates (measured: u8 30 dB, opus 30 dB, mp3 26 dB, aac 47 dB).
    ::testing::Values(Clip{"jfk.flac", "-c:a flac", 300, 1.0, 0}, Clip{"jfk_f32.wav", "-c:a pcm_f32le", 300, 1.0, 0},
                      Clip{"jfk_f64.wav", "-c:a pcm_f64le", 300, 1.0, 0},
                      Clip{"jfk_s24.wav", "-c:a pcm_s24le", 300, 1.0, 0},
                      Clip{"jfk_u8.wav", "-c:a pcm_u8", 28, 0.999, 0},
                      // Both channels carry the original at full level, so the downmix is the original again.
                      Clip{"jfk_44k_stereo.wav", "-af 'pan=stereo|c0=c0|c1=c0' -ar 44100", 65, 0.9999, 0},
                      Clip{"jfk.webm", "-c:a libopus -b:a 48k", 27, 0.999, 0},
                      Clip{"jfk.ogg", "-c:a libopus -b:a 48k", 27, 0.999, 0},
                      Clip{"jfk.mp3", "-c:a libmp3lame -b:a 128k", 23, 0.9999, 0},
                      Clip{"jfk.m4a", "-c:a aac -b:a 128k", 40, 0.9999, 1024}),
    [](const auto& info) {
      std::string n = info.param.file;
      for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

// ---- StreamDecoder ----

std::vector<float> decode_whole(std::span<const uint8_t> bytes) {
  auto decoder = StreamDecoder::create();
  std::vector<float> out = decoder->push(bytes);
  const std::vector<float> tail = decoder->finish();
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

struct PieceResult {
  std::vector<float> samples;
  size_t from_push = 0;  // samples returned by push() rather than finish()
};

PieceResult decode_in_pieces(std::span<const uint8_t> bytes, uint32_t seed, size_t max_piece = 4096) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, max_piece);
  auto decoder = StreamDecoder::create();
  PieceResult r;
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t n = std::min(size(rng), bytes.size() - pos);
    const std::vector<float> out = decoder->push(bytes.subspan(pos, n));
    r.samples.insert(r.samples.end(), out.begin(), out.end());
    pos += n;
  }
  r.from_push = r.samples.size();
  const std::vector<float> tail = decoder->finish();
  r.samples.insert(r.samples.end(), tail.begin(), tail.end());
  return r;
}

struct StreamClip {
  const char* file;
  const char* ffmpeg_args;
  double min_snr_db;
  // An unseekable stream cannot use the mp3 trailer that says how much end padding to trim.
  size_t extra_samples = 0;
  // Samples that only finish() returns: the last packet(s) and the resampler delay line.
  // FLAC's parser needs the next frame's header before it releases a frame of 4608 samples.
  size_t held_until_finish = 3000;
};
void PrintTo(const StreamClip& c, std::ostream* os) { *os << c.file; }

class StreamTest : public ::testing::TestWithParam<StreamClip> {};

TEST_P(StreamTest, RandomPiecesDecodeExactlyLikeTheWholeStream) {
  const StreamClip& clip = GetParam();
  const std::vector<uint8_t> bytes = read_bytes(make_clip(clip.file, clip.ffmpeg_args));
  const std::vector<float> whole = decode_whole(bytes);
  const auto m = best_match(original(), whole, 0);
  EXPECT_GE(m.snr_db, clip.min_snr_db);
  EXPECT_EQ(whole.size(), 176000u + clip.extra_samples);
  for (uint32_t seed : {1u, 2u}) {
    const PieceResult pieces = decode_in_pieces(bytes, seed);
    EXPECT_EQ(pieces.samples, whole) << "seed " << seed;
    // Audio comes out while the stream arrives, not only at the end: all but the
    // last packet or so (and the resampler's delay line) is returned by push().
    EXPECT_GE(pieces.from_push, whole.size() - clip.held_until_finish) << "seed " << seed;
  }
}

TEST_P(StreamTest, WholeStreamMatchesLoadFile) {
  const StreamClip& clip = GetParam();
  const std::filesystem::path path = make_clip(clip.file, clip.ffmpeg_args);
  const std::vector<float> streamed = decode_whole(read_bytes(path));
  const std::vector<float> loaded = load_file(path);
  ASSERT_EQ(streamed.size(), loaded.size() + clip.extra_samples);
  EXPECT_TRUE(std::equal(loaded.begin(), loaded.end(), streamed.begin()));
}

INSTANTIATE_TEST_SUITE_P(Formats, StreamTest,
                         ::testing::Values(StreamClip{"jfk.webm", "-c:a libopus -b:a 48k", 27},
                                           // What browsers' MediaRecorder sends: no cues, clusters of unknown size.
                                           StreamClip{"jfk_live.webm", "-c:a libopus -b:a 32k -f webm -live 1", 24},
                                           StreamClip{"jfk.ogg", "-c:a libopus -b:a 48k", 27},
                                           StreamClip{"jfk.mp3", "-c:a libmp3lame -b:a 128k", 23, 303},
                                           StreamClip{"jfk_44k_stereo.wav", "-af 'pan=stereo|c0=c0|c1=c0' -ar 44100",
                                                      65},
                                           StreamClip{"jfk.flac", "-c:a flac", 300, 0, 2 * 4608 + 1000}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// A live stream must not wait for lots of audio before the first samples come out: with
// 256-byte pieces, samples appear within about half a second of stream (2 KiB go to format probing).
TEST(StreamDecoder, FirstSamplesArriveAfterLittleOfTheStream) {
  const std::pair<const char*, const char*> clips[] = {{"jfk_live.webm", "-c:a libopus -b:a 32k -f webm -live 1"},
                                                       {"jfk_live.ogg", "-c:a libopus -b:a 48k -page_duration 100000"},
                                                       {"jfk.mp3", "-c:a libmp3lame -b:a 128k"}};
  for (const auto& [file, args] : clips) {
    const std::vector<uint8_t> bytes = read_bytes(make_clip(file, args));
    auto decoder = StreamDecoder::create();
    size_t pushed = 0;
    while (pushed < bytes.size()) {
      const size_t n = std::min<size_t>(256, bytes.size() - pushed);
      const bool got = !decoder->push(std::span(bytes).subspan(pushed, n)).empty();
      pushed += n;
      if (got) break;
    }
    const double stream_seconds = 11.0 * double(pushed) / double(bytes.size());
    std::printf("%s: first samples after %zu bytes (%.2f s of the stream)\n", file, pushed, stream_seconds);
    EXPECT_LT(stream_seconds, 0.6) << file;
  }
}

ErrorCode push_until_error(StreamDecoder& decoder, std::span<const uint8_t> bytes, size_t piece, size_t* pushed) {
  *pushed = 0;
  try {
    for (size_t pos = 0; pos < bytes.size(); pos += piece) {
      const size_t n = std::min(piece, bytes.size() - pos);
      decoder.push(bytes.subspan(pos, n));
      *pushed += n;
    }
    decoder.finish();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;  // no error at all
}

TEST(StreamDecoder, RandomGarbageIsRejectedWithinTheProbeWindow) {
  std::mt19937 rng(7);
  std::vector<uint8_t> garbage(1 << 20);
  for (uint8_t& b : garbage) b = uint8_t(rng());
  auto decoder = StreamDecoder::create();
  size_t pushed = 0;
  EXPECT_EQ(push_until_error(*decoder, garbage, 4096, &pushed), ErrorCode::kInvalidAudio);
  EXPECT_LE(pushed, 128u * 1024);
  // The decoder stays failed; it never crashes or hangs afterwards.
  EXPECT_THROW(decoder->push(garbage), Error);
}

TEST(StreamDecoder, TextIsRejected) {
  std::string text;
  while (text.size() < 200000) text += "GET /asr HTTP/1.1\r\nHost: localhost\r\n\r\n{\"type\": \"config\"}\n";
  auto decoder = StreamDecoder::create();
  size_t pushed = 0;
  EXPECT_EQ(
      push_until_error(*decoder, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), 1000, &pushed),
      ErrorCode::kInvalidAudio);
  EXPECT_LE(pushed, 128u * 1024);
}

TEST(StreamDecoder, GarbageAfterAValidHeaderIsRejected) {
  std::vector<uint8_t> bytes = read_bytes(make_clip("jfk.webm", "-c:a libopus -b:a 48k"));
  bytes.resize(3000);  // header and the first blocks
  std::mt19937 rng(11);
  for (int i = 0; i < 3 << 20; ++i) bytes.push_back(uint8_t(rng()));
  auto decoder = StreamDecoder::create();
  size_t pushed = 0;
  EXPECT_EQ(push_until_error(*decoder, bytes, 4096, &pushed), ErrorCode::kInvalidAudio);
}

TEST(StreamDecoder, StreamTruncatedInsideTheHeaderIsInvalid) {
  const std::pair<const char*, const char*> clips[] = {
      {"jfk.webm", "-c:a libopus -b:a 48k"},
      {"jfk.ogg", "-c:a libopus -b:a 48k"},
      {"jfk_44k_stereo.wav", "-af 'pan=stereo|c0=c0|c1=c0' -ar 44100"}};
  for (const auto& [file, args] : clips) {
    const std::vector<uint8_t> bytes = read_bytes(make_clip(file, args));
    ASSERT_GT(bytes.size(), 40u);
    auto decoder = StreamDecoder::create();
    EXPECT_TRUE(decoder->push(std::span(bytes).first(40)).empty());
    try {
      decoder->finish();
      ADD_FAILURE() << file << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio) << file;
      EXPECT_NE(std::string(e.what()).find("audio stream"), std::string::npos) << e.what();
    }
  }
}

TEST(StreamDecoder, TinyStreamsEndWithAClearError) {
  const std::vector<std::vector<uint8_t>> inputs = {
      std::vector<uint8_t>(40, 0), {0x1A}, {'R', 'I', 'F', 'F'}, {'O', 'g', 'g', 'S', 0, 2}, {0x1A, 0x45, 0xDF, 0xA3}};
  for (const auto& input : inputs) {
    auto decoder = StreamDecoder::create();
    EXPECT_TRUE(decoder->push(input).empty());
    try {
      decoder->finish();
      ADD_FAILURE() << input.size() << "-byte input: no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidAudio) << e.what();
    }
  }
}

TEST(StreamDecoder, StreamCutMidwayKeepsWhatWasDecoded) {
  const std::vector<uint8_t> bytes = read_bytes(make_clip("jfk.webm", "-c:a libopus -b:a 48k"));
  const std::vector<float> whole = decode_whole(bytes);
  const std::vector<float> half = decode_whole(std::span(bytes).first(bytes.size() / 2 + 7));
  ASSERT_GT(half.size(), whole.size() * 4 / 10);
  ASSERT_LT(half.size(), whole.size() * 6 / 10);
  // Identical up to the resampler's flush at the cut.
  const size_t common = half.size() - 64;
  EXPECT_TRUE(std::equal(half.begin(), half.begin() + common, whole.begin()));
}

TEST(StreamDecoder, EmptyStreamGivesNoSamples) {
  auto decoder = StreamDecoder::create();
  EXPECT_TRUE(decoder->push({}).empty());
  EXPECT_TRUE(decoder->finish().empty());
  EXPECT_TRUE(StreamDecoder::create()->finish().empty());
}

TEST(StreamDecoder, DestroyingMidStreamReturns) {
  const std::vector<uint8_t> bytes = read_bytes(make_clip("jfk.ogg", "-c:a libopus -b:a 48k"));
  for (size_t cut : {size_t(10), size_t(5000), bytes.size() / 2}) {
    auto decoder = StreamDecoder::create();
    decoder->push(std::span(bytes).first(cut));
  }  // destructors must stop the worker without finish()
}

// A figure of /proc/self/status in bytes (VmPeak: the peak of the address space); 0 when unknown.
double status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
  return 0;
}

// Found by the stream_decoder fuzz target (fuzz_regressions/stream_decoder/oom-65a7...):
// a 158-byte WAV whose LIST chunk claims 1.4 GB made the demuxer allocate and zero that
// much for the metadata, so a few such requests could exhaust a server's memory.
// FFmpeg's allocations are capped (ffmpeg_decode.h): the claim is refused, not served.
TEST(StreamDecoder, AChunkClaimingGigabytesIsNotAllocated) {
  static constexpr char kBomb[] =
      "\x52\x49\x46\x46\x66\x74\x79\x70\x57\x41\x56\x45\x66\x6d\x74\x20\x10\x00\x00\x00\x01\x00\x09\x00"
      "\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00\x4c\x49\x53\x54\x1a\x00\x00\x00\x49\xbc\xb9\xb0"
      "\xb6\x00\x54\x53\x00\x0e\x00\x46\x4c\x61\x76\x66\x36\x30\x2e\x32\x37\x2e\x31\x30\x30\x00\x64\x61"
      "\x74\x61\x80\x00\x00\x00\x00\x04\x42\x02\x80\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x00\x00\x1a\x45\xdf\xa3\x00\x2c\xc2\xfc\x1d\xfa\xa5\xf7\x6c\xf5\x84\xf3"
      "\xfc\xf1\xde\xf0\x13\xf8\x94\xfa\x3f\xfd\x4f\x67\x67\x53";
  const std::vector<uint8_t> bytes(kBomb, kBomb + sizeof kBomb - 1);
  ASSERT_EQ(bytes.size(), 158u);
  const double before = status_bytes("VmPeak");
  ASSERT_GT(before, 0);
  try {
    auto decoder = StreamDecoder::create();
    decoder->push(bytes);
    decoder->finish();
  } catch (const Error&) {
    // refusing the stream is fine; allocating the claim is not
  }
  EXPECT_LT(status_bytes("VmPeak") - before, 256.0 * 1024 * 1024) << "bytes of address space reserved";
}

TEST(LoadFile, ErrorsNameTheFileAndTheProblem) {
  const std::filesystem::path dir = testing::clip_dir();
  std::filesystem::create_directories(dir);
  auto expect_error = [](const std::filesystem::path& p, ErrorCode code, const std::string& needle) {
    try {
      load_file(p);
      ADD_FAILURE() << p << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(dir / "does-not-exist.wav", ErrorCode::kIo, "no such file");
  {
    std::ofstream(dir / "empty.mp3");
    std::ofstream garbage(dir / "garbage.mp3", std::ios::binary);
    std::mt19937 rng(3);
    for (int i = 0; i < 100000; ++i) garbage.put(char(rng()));
    const std::vector<uint8_t> wav =
        read_bytes(make_clip("jfk_44k_stereo.wav", "-af 'pan=stereo|c0=c0|c1=c0' -ar 44100"));
    std::ofstream cut(dir / "truncated.wav", std::ios::binary);
    cut.write(reinterpret_cast<const char*>(wav.data()), std::streamsize(wav.size() / 2));
  }
  expect_error(dir / "empty.mp3", ErrorCode::kInvalidAudio, "empty");
  expect_error(dir / "garbage.mp3", ErrorCode::kInvalidAudio, "");
  expect_error(dir / "truncated.wav", ErrorCode::kInvalidAudio, "truncated");
}

}  // namespace
}  // namespace earshot::audio

// Audio and request values crafted to cost much or say little, through the server:
// a WAV below 8 kHz, a decompression bomb in one message and in an upload, a raw
// PCM message past the per-message bound, WAV files back to back on a stream, a
// NaN sample, a 1 MB Deepgram message type, a NUL in a query value. Each ends its
// request or stream with an error in its protocol's words, and costs no more than
// the limits say (the decoders' own bounds are tested in tests/audio).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "../audio/wav_bytes.h"
#include "audio/audio.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using audio::testing::Bytes;
using audio::testing::make_wav;
using audio::testing::put_float;
using nlohmann::json;

std::string as_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// An hour of silence as FLAC in 16384-sample frames: 51 KB that decode to 230 MB of samples.
const std::vector<uint8_t>& flac_bomb() {
  static const std::vector<uint8_t> bytes = [] {
    const auto path = std::filesystem::temp_directory_path() / ("earshot-bomb-" + std::to_string(::getpid()) + ".flac");
    const std::string cmd =
        "ffmpeg -nostdin -loglevel error -y -f lavfi -i anullsrc=r=16000:cl=mono -t 3600 -c:a flac "
        "-frame_size 16384 " +
        path.string();
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("ffmpeg failed: " + cmd);
    std::vector<uint8_t> b = read_bytes(path);
    std::filesystem::remove(path);
    return b;
  }();
  return bytes;
}

std::vector<uint8_t> wav_of(const std::vector<float>& samples) {
  Bytes data;
  for (int16_t v : to_s16(samples)) audio::testing::put16(data, uint16_t(v));
  return make_wav({}, data);
}

HttpResult upload(uint16_t port, const std::string& file) {
  std::string body =
      "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" + file + "\r\n--B--\r\n";
  return http_request(port, "POST", "/v1/audio/transcriptions", body,
                      {{"Content-Type", "multipart/form-data; boundary=B"}});
}

std::vector<json> read_all(WsClient& client) {
  std::vector<json> out;
  while (auto m = client.read()) out.push_back(*m);
  return out;
}

class HostileAudio : public ServerFixture {
 protected:
  void start_with(server::ServerConfig config = {}) {
    auto hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start(config, hooks);
  }
  // The last message of an /asr stream that failed (its error) and the close code.
  json asr_error(WsClient& client) {
    json last;
    while (auto m = client.read()) last = *m;
    EXPECT_EQ(client.close_code(), 4400);
    return last;
  }
};

// The issue's probe: a 64 KB upload of 8 Hz 8-bit WAV grew the server by 1.29 GB.
TEST_F(HostileAudio, AnUploadBelowEightKilohertzIsRefusedOnItsHeader) {
  start_with();
  HttpResult r = upload(port_, as_string(make_wav({.rate = 8, .bits = 8}, Bytes(65536, 128))));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "cannot decode 'a.wav': audio stream (wav): sample rate 8 Hz is below the lowest earshot takes, 8000 Hz "
            "(send audio at 8-48 kHz; 16 kHz needs no resampling)");
  HttpResult listen = http_request(port_, "POST", "/v1/listen", as_string(make_wav({.rate = 8}, Bytes(4096, 0))));
  EXPECT_EQ(listen.status, 400) << listen.body;
  EXPECT_NE(json::parse(listen.body)["err_msg"].get<std::string>().find("sample rate 8 Hz is below"),
            std::string::npos);
  EXPECT_TRUE(wait_idle());
}

TEST_F(HostileAudio, ABombUploadStopsAtTheDecodedAudioLimit) {
  server::ServerConfig config;
  config.max_audio_seconds = 60;
  start_with(config);
  HttpResult r = upload(port_, as_string(flac_bomb()));
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "'a.wav': audio longer than this server's limit of 60 s of decoded audio per file");
  HttpResult listen = http_request(port_, "POST", "/v1/listen", as_string(flac_bomb()));
  EXPECT_EQ(listen.status, 413) << listen.body;
  EXPECT_TRUE(wait_idle());
}

TEST_F(HostileAudio, ABombMessageFailsItsStreamAtThePerMessageBound) {
  start_with();  // --max-buffered-seconds 60: one message may decode to a minute
  WsClient client(port_, "/asr");
  ASSERT_EQ(client.read().value()["type"], "config");
  client.send_binary(flac_bomb());
  const json last = asr_error(client);
  EXPECT_EQ(last["status"], "error");
  EXPECT_EQ(last["error"],
            "invalid audio: one message decodes to more than 60.0 s of audio, the most this server takes per message "
            "(--max-buffered-seconds); send the audio in smaller messages");
  EXPECT_TRUE(wait_idle());
}

// A megabyte of 8 kHz linear16 is 62.5 s at 16 kHz: past the bound, refused before
// it is converted; the same stream in smaller messages passes.
TEST_F(HostileAudio, ARawPcmMessagePastTheBoundIsRefusedInDeepgramsWords) {
  start_with();
  {
    WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=8000");
    client.send_binary(std::vector<uint8_t>(1'000'000, 0));
    const std::vector<json> messages = read_all(client);
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(client.close_code(), 1008);
    EXPECT_EQ(client.close_reason().rfind("invalid audio: one message decodes to more than 60.0 s", 0), 0u)
        << client.close_reason();
  }
  {
    WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=8000");
    for (int i = 0; i < 4; ++i) client.send_binary(std::vector<uint8_t>(250'000, 0));
    client.send_text(R"({"type":"CloseStream"})");
    const std::vector<json> messages = read_all(client);
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back()["type"], "Metadata");
    EXPECT_NEAR(messages.back()["duration"].get<double>(), 62.5, 0.01);
    EXPECT_EQ(client.close_code(), 1000);
  }
  EXPECT_TRUE(wait_idle());
}

// Clients that send each recorded chunk as a WAV file of its own: every file is heard.
TEST_F(HostileAudio, WavFilesBackToBackOnAStreamAreAllTranscribed) {
  start_with();
  const std::vector<float> first = two_phrases(0.1f, 0.2f), second = two_phrases(0.3f, 0.4f);
  WsClient client(port_, "/asr");
  client.read();
  client.send_binary(wav_of(first));
  client.send_binary(wav_of(second));
  client.send_end();
  const std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  std::vector<float> both = first;
  both.insert(both.end(), second.begin(), second.end());
  EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(from_s16(to_s16(both))));
  client.close();
  EXPECT_TRUE(wait_idle());
}

TEST_F(HostileAudio, ANanSampleIsRefusedAsInvalidAudio) {
  start_with();
  Bytes data;
  for (int i = 0; i < 16000; ++i) put_float(data, i == 8000 ? std::numeric_limits<float>::quiet_NaN() : 0.1f);
  const std::vector<uint8_t> wav = make_wav({.tag = 3, .bits = 32}, data);
  HttpResult r = upload(port_, as_string(wav));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "cannot decode 'a.wav': audio stream (wav): float sample 8000 (at 0.500 s) is not a finite number (NaN or "
            "infinity): the audio is corrupt");
  WsClient client(port_, "/asr");
  client.read();
  client.send_binary(wav);
  client.send_end();
  EXPECT_EQ(asr_error(client)["error"],
            "invalid audio: audio stream (wav): float sample 8000 (at 0.500 s) is not a finite number (NaN or "
            "infinity): the audio is corrupt");
  EXPECT_TRUE(wait_idle());
}

TEST_F(HostileAudio, AMegabyteDeepgramTypeIsQuotedByAShortPrefix) {
  start_with();
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000");
  client.send_text(json{{"type", std::string(1'000'000, 'K')}}.dump());
  const auto error = client.read();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["type"], "Error");
  EXPECT_EQ((*error)["description"], "unknown message type '" + std::string(64, 'K') +
                                         "...' (1000000 bytes): expected KeepAlive, Finalize or CloseStream");
  EXPECT_LT(error->dump().size(), 600u);
  client.send_text(R"({"type":"CloseStream"})");  // the stream goes on
  const std::vector<json> rest = read_all(client);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back()["type"], "Metadata");
  EXPECT_TRUE(wait_idle());
}

TEST_F(HostileAudio, ANulInAQueryValueIsShownEscapedNotCut) {
  start_with();
  WsClient asr(port_, "/asr?mode=full%00diff%0A");
  const auto refusal = asr.read();
  ASSERT_TRUE(refusal);
  EXPECT_EQ((*refusal)["error"], "invalid mode 'full\\x00diff\\x0A': expected 'full' or 'diff'");
  WsClient listen(port_, "/v1/listen?punctuate=true%00false");
  const auto error = listen.read();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["description"], "invalid option 'punctuate': expected true or false, got 'true\\x00false'");
  read_all(listen);
  EXPECT_EQ(listen.close_code(), 1008);
  EXPECT_EQ(listen.close_reason(), "invalid option 'punctuate': expected true or false, got 'true\\x00false'");
  EXPECT_TRUE(wait_idle());
}

}  // namespace
}  // namespace earshot::testing

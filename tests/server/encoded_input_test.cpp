// Encoded input (webm/opus, as browsers send it) decoded per session with
// FFmpeg, and garbage bytes that must end only their own session.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "audio/audio.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Encodes ../shared/data/jfk.wav with Debian's ffmpeg at test time.
std::vector<uint8_t> make_clip(const std::string& args, const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("earshot-server-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto out = dir / name;
  std::string cmd =
      "ffmpeg -nostdin -loglevel error -y -i " EARSHOT_SHARED_DIR "/data/jfk.wav " + args + " " + out.string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("ffmpeg failed: " + cmd);
  auto bytes = read_bytes(out);
  std::filesystem::remove_all(dir);
  return bytes;
}

std::vector<float> decode_whole(const std::vector<uint8_t>& bytes) {
  auto decoder = audio::StreamDecoder::create();
  std::vector<float> samples = decoder->push(bytes);
  std::vector<float> tail = decoder->finish();
  samples.insert(samples.end(), tail.begin(), tail.end());
  return samples;
}

class EncodedInput : public ServerFixture {
 protected:
  void SetUp() override {
    auto hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start({}, hooks);
  }
  std::vector<json> stream(WsClient& client, const std::vector<uint8_t>& bytes, size_t chunk) {
    for (size_t i = 0; i < bytes.size(); i += chunk)
      client.send_binary(
          std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                               bytes.begin() + static_cast<std::ptrdiff_t>(std::min(bytes.size(), i + chunk))));
    client.send_end();
    return client.read_until_stop();
  }
};

TEST_F(EncodedInput, WebmOpusInPiecesEqualsTheWholeFileAlone) {
  std::vector<uint8_t> webm = make_clip("-c:a libopus -b:a 48k -f webm", "jfk.webm");
  WsClient client(port_, "/asr");
  EXPECT_EQ(client.read(), json::parse(R"({"type":"config","useAudioWorklet":false,"mode":"full"})"));
  std::vector<json> messages = stream(client, webm, 1600);  // ~100 ms MediaRecorder-sized pieces
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["status"], "active_transcription");
  json expected = lines_alone(decode_whole(webm));
  EXPECT_EQ(final_update["lines"], expected);
  EXPECT_GE(expected.size(), 1u);
}

TEST_F(EncodedInput, OggOpusAndMp3Work) {
  for (auto [args, name] :
       {std::pair<std::string, std::string>{"-c:a libopus -f ogg", "jfk.ogg"}, {"-c:a libmp3lame -f mp3", "jfk.mp3"}}) {
    std::vector<uint8_t> bytes = make_clip(args, name);
    WsClient client(port_, "/asr");
    client.read();
    std::vector<json> messages = stream(client, bytes, 4096);
    ASSERT_GE(messages.size(), 2u) << name;
    EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(decode_whole(bytes))) << name;
  }
}

TEST_F(EncodedInput, GarbageEndsThatSessionWithErrorAnd4400Only) {
  std::vector<uint8_t> webm = make_clip("-c:a libopus -f webm", "jfk.webm");
  WsClient good(port_, "/asr");
  good.read();
  WsClient bad(port_, "/asr");
  bad.read();
  std::mt19937 rng(1234);
  std::vector<uint8_t> garbage(64 * 1024);
  for (auto& b : garbage) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < garbage.size(); i += 4096)
    bad.send_binary(std::vector<uint8_t>(garbage.begin() + static_cast<std::ptrdiff_t>(i),
                                         garbage.begin() + static_cast<std::ptrdiff_t>(i + 4096)));
  bad.send_end();
  json last;
  while (auto m = bad.read()) last = *m;
  EXPECT_EQ(last["status"], "error");
  EXPECT_EQ(last["error"].get<std::string>().rfind("invalid audio: ", 0), 0u) << last.dump();
  EXPECT_EQ(bad.close_code(), 4400);
  std::vector<json> messages = stream(good, webm, 2000);
  EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(decode_whole(webm)));
  good.close();
  EXPECT_TRUE(wait_idle());
}

}  // namespace
}  // namespace earshot::testing

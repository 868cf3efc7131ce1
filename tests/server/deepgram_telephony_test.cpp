// What voice agents send Deepgram's /v1/listen on the loopback server: G.711
// µ-law at 8 kHz (transcribed as the same audio decoded alone), interleaved
// channels mixed down or, with multichannel, a transcript per channel (live and
// prerecorded; each channel a session slot), and keyterm/keywords reaching the
// model with the server's default list; OpenAI's prompt on the file route too.
#include <gtest/gtest.h>

#include <mutex>

#include "audio/audio.h"
#include "audio/raw_decoder.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

// G.711 µ-law, as a telephony client encodes 16-bit PCM.
uint8_t mulaw(int16_t pcm) {
  const int sign = pcm < 0 ? 0x80 : 0;
  int magnitude = std::min(std::abs(static_cast<int>(pcm)), 32635) + 0x84;
  int exponent = 7;
  for (int mask = 0x4000; (magnitude & mask) == 0 && exponent > 0; mask >>= 1) --exponent;
  return static_cast<uint8_t>(~(sign | (exponent << 4) | ((magnitude >> (exponent + 3)) & 0x0F)));
}

// A square wave at `rate` (the fakes' speech), or silence.
std::vector<int16_t> square(double seconds, int rate, int16_t amplitude) {
  std::vector<int16_t> out(static_cast<size_t>(seconds * rate));
  for (size_t i = 0; i < out.size(); ++i) out[i] = (i / 10) % 2 ? amplitude : static_cast<int16_t>(-amplitude);
  return out;
}
std::vector<int16_t> join(std::initializer_list<std::vector<int16_t>> parts) {
  std::vector<int16_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Committed words of audio decoded alone by `decoder`, through a lone session with the same doubles.
std::vector<std::string> words_alone(const std::vector<uint8_t>& bytes, audio::StreamDecoder& decoder) {
  std::vector<float> pcm = decoder.push(bytes);
  const std::vector<float> tail = decoder.finish();
  pcm.insert(pcm.end(), tail.begin(), tail.end());
  auto hooks = fake_hooks();
  session::StreamSession s(hooks.make_processor({"en", {}}), hooks.make_vad(), session::StreamOptions{});
  s.push_audio(pcm);
  s.end_of_stream();
  while (s.has_work()) s.step();
  std::vector<std::string> out;
  for (const events::Event& e : s.events_since(0).events)
    if (const auto* c = std::get_if<events::WordsCommitted>(&e))
      for (const Word& w : c->words) out.push_back(w.text.substr(1));
  return out;
}

std::vector<json> read_all(WsClient& client) {
  std::vector<json> out;
  while (auto m = client.read()) out.push_back(*m);
  return out;
}

// Final words per channel_index[0] of a live stream's Results.
std::map<int, std::vector<std::string>> finals_by_channel(const std::vector<json>& messages) {
  std::map<int, std::vector<std::string>> out;
  for (const json& m : messages)
    if (m["type"] == "Results" && m["is_final"].get<bool>())
      for (const json& w : m["channel"]["alternatives"][0]["words"])
        out[m["channel_index"][0].get<int>()].push_back(w["punctuated_word"]);
  return out;
}

// POST /v1/audio/transcriptions of 0.1 s of silence (a WAV file) with one more form field.
HttpResult upload_with(uint16_t port, const std::string& field, const std::string& value) {
  const std::string b = "XyZboundary";
  const std::string body = "--" + b + "\r\nContent-Disposition: form-data; name=\"" + field + "\"\r\n\r\n" + value +
                           "\r\n--" + b +
                           "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
                           wav_file_bytes(std::vector<int16_t>(1600, 0)) + "\r\n--" + b + "--\r\n";
  return http_request(port, "POST", "/v1/audio/transcriptions", body,
                      {{"Content-Type", "multipart/form-data; boundary=" + b}});
}

class Telephony : public ServerFixture {
 protected:
  void start_with(server::ServerConfig config = {}) {
    config.keyterms.add("Nemotron");  // serve --keyterms: every stream's
    auto hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    auto fake = hooks.make_processor;
    hooks.make_processor = [this, fake](const server::ProcessorRequest& r) {
      std::lock_guard lock(mutex_);
      requests_.push_back(r);
      return fake(r);
    };
    start(config, hooks);
  }
  std::vector<server::ProcessorRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::mutex mutex_;
  std::vector<server::ProcessorRequest> requests_;
};

TEST_F(Telephony, MulawAt8kHzIsTheSameAudioDecodedAlone) {
  start_with();
  const std::vector<int16_t> pcm = join({square(1.0, 8000, 3000), square(6.0, 8000, 0), square(1.0, 8000, 9000)});
  std::vector<uint8_t> bytes;
  for (int16_t s : pcm) bytes.push_back(mulaw(s));
  WsClient client(port_, "/v1/listen?encoding=mulaw&sample_rate=8000");
  for (size_t i = 0; i < bytes.size(); i += 800)
    client.send_binary(std::vector<uint8_t>(bytes.begin() + i, bytes.begin() + std::min(bytes.size(), i + 800)));
  client.send_end();
  const std::vector<json> messages = read_all(client);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back()["type"], "Metadata");
  EXPECT_NEAR(messages.back()["duration"].get<double>(), 8.0, 0.01);
  audio::RawDecoder alone(audio::RawEncoding::kMulaw, 8000);
  const std::vector<std::string> expected = words_alone(bytes, alone);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(finals_by_channel(messages)[0], expected);
}

std::vector<uint8_t> interleaved(const std::vector<int16_t>& a, const std::vector<int16_t>& b) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    for (int16_t s : {i < a.size() ? a[i] : int16_t{0}, i < b.size() ? b[i] : int16_t{0}}) {
      out.push_back(static_cast<uint8_t>(s & 0xFF));
      out.push_back(static_cast<uint8_t>((s >> 8) & 0xFF));
    }
  return out;
}

std::vector<uint8_t> channel_bytes(const std::vector<int16_t>& pcm) {
  std::vector<uint8_t> out;
  for (int16_t s : pcm) {
    out.push_back(static_cast<uint8_t>(s & 0xFF));
    out.push_back(static_cast<uint8_t>((s >> 8) & 0xFF));
  }
  return out;
}

TEST_F(Telephony, MultichannelGivesEachChannelItsOwnTranscript) {
  start_with();
  const std::vector<int16_t> left = join({square(1.0, 16000, 3000), square(6.0, 16000, 0), square(1.0, 16000, 9000)});
  const std::vector<int16_t> right = join({square(2.5, 16000, 0), square(1.5, 16000, 6000), square(4.0, 16000, 0)});
  const std::vector<uint8_t> stereo = interleaved(left, right);
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000&channels=2&multichannel=true");
  for (size_t i = 0; i < stereo.size(); i += 6400)
    client.send_binary(std::vector<uint8_t>(stereo.begin() + i, stereo.begin() + std::min(stereo.size(), i + 6400)));
  client.send_text(R"({"type":"CloseStream"})");
  const std::vector<json> messages = read_all(client);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back()["type"], "Metadata");
  EXPECT_EQ(messages.back()["channels"], 2);
  for (const json& m : messages)
    if (m["type"] == "Results") {
      EXPECT_EQ(m["channel_index"][1], 2);
    }
  audio::RawDecoder a(audio::RawEncoding::kLinear16, 16000), b(audio::RawEncoding::kLinear16, 16000);
  const auto finals = finals_by_channel(messages);
  EXPECT_EQ(finals.at(0), words_alone(channel_bytes(left), a));
  EXPECT_EQ(finals.at(1), words_alone(channel_bytes(right), b));
  EXPECT_NE(finals.at(0), finals.at(1));
  EXPECT_TRUE(wait_idle());

  // Without multichannel the channels are mixed down to one transcript.
  WsClient mixed(port_, "/v1/listen?encoding=linear16&sample_rate=16000&channels=2");
  mixed.send_binary(stereo);
  mixed.send_end();
  const std::vector<json> one = read_all(mixed);
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one.back()["channels"], 1);
  EXPECT_EQ(finals_by_channel(one).size(), 1u);
}

TEST_F(Telephony, AChannelBeyondTheFreeSessionsIsRefused) {
  server::ServerConfig config;
  config.max_sessions = 2;
  start_with(config);
  WsClient client(port_, "/v1/listen?encoding=mulaw&sample_rate=8000&channels=3&multichannel=true");
  const std::vector<json> messages = read_all(client);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["type"], "Error");
  EXPECT_NE(messages[0]["description"].get<std::string>().find("3 channels needs 3 sessions"), std::string::npos)
      << messages[0];
  EXPECT_EQ(client.close_code(), 1013);
  EXPECT_TRUE(wait_idle());  // the slots taken are given back
  WsClient two(port_, "/v1/listen?encoding=mulaw&sample_rate=8000&channels=2&multichannel=true");
  two.send_binary(std::vector<uint8_t>(16000, 0xFF));
  two.send_end();
  EXPECT_EQ(read_all(two).back()["type"], "Metadata");
}

TEST_F(Telephony, PrerecordedMultichannelAnswersPerChannel) {
  start_with();
  const std::vector<int16_t> left = square(1.0, 16000, 3000);
  const std::vector<int16_t> right = join({square(0.5, 16000, 0), square(1.0, 16000, 8000)});
  const std::string body = [&] {
    const std::vector<uint8_t> b = interleaved(left, right);
    return std::string(b.begin(), b.end());
  }();
  const HttpResult r =
      http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000&channels=2&multichannel=true", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["results"]["channels"].size(), 2u);
  EXPECT_EQ(j["metadata"]["channels"], 2);
  audio::RawDecoder a(audio::RawEncoding::kLinear16, 16000), b(audio::RawEncoding::kLinear16, 16000);
  for (int c = 0; c < 2; ++c) {
    std::vector<std::string> got;
    for (const json& w : j["results"]["channels"][c]["alternatives"][0]["words"]) got.push_back(w["punctuated_word"]);
    EXPECT_EQ(got, words_alone(channel_bytes(c == 0 ? left : right), c == 0 ? a : b)) << "channel " << c;
  }
}

TEST_F(Telephony, KeytermsAndKeywordsReachTheModelAfterTheServersOwn) {
  start_with();
  WsClient client(port_,
                  "/v1/listen?encoding=linear16&sample_rate=16000&keyterm=earshot&keyterm=ggml%20kernels"
                  "&keywords=Parakeet:3&keywords=um:-2");
  client.send_text(R"({"type":"CloseStream"})");
  read_all(client);
  HttpResult file = http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000&keyterm=Qwen",
                                 std::string(3200, '\0'));
  EXPECT_EQ(file.status, 200) << file.body;
  const std::vector<server::ProcessorRequest> got = requests();
  ASSERT_EQ(got.size(), 2u);
  std::vector<std::pair<std::string, double>> live;
  for (const Keyterm& k : got[0].keyterms.terms) live.emplace_back(k.text, k.weight);
  EXPECT_EQ(live, (std::vector<std::pair<std::string, double>>{
                      {"Nemotron", 1}, {"earshot", 1}, {"ggml kernels", 1}, {"Parakeet", 3}, {"um", -2}}));
  ASSERT_EQ(got[1].keyterms.terms.size(), 2u);
  EXPECT_EQ(got[1].keyterms.terms[1].text, "Qwen");
}

TEST_F(Telephony, OpenAIsPromptReachesTheModel) {
  start_with();
  const HttpResult r = upload_with(port_, "prompt", "earshot, ggml");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<server::ProcessorRequest> got = requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].keyterms.prompt, "earshot, ggml");
  EXPECT_EQ(got[0].keyterms.terms.size(), 1u);  // the server's own
}

// earshot's own delay_ms (a Voxtral Realtime stream's delay) reaches the model from
// every route that opens a stream; a value that is no whole number of ms is refused
// by the route, one the model was not trained with by the model (serve's hook).
TEST_F(Telephony, TheStreamDelayReachesTheModelFromEveryRoute) {
  start_with();
  {
    WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000&delay_ms=160");
    client.send_text(R"({"type":"CloseStream"})");
    read_all(client);
  }
  EXPECT_EQ(http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000&delay_ms=240",
                         std::string(3200, '\0'))
                .status,
            200);
  {
    WsClient client(port_, "/asr?delay_ms=320");
    client.send_end();
    EXPECT_EQ(client.read_until_stop().back()["type"], "ready_to_stop");
    client.close();
  }
  {
    WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000");  // none: the server's
    client.send_text(R"({"type":"CloseStream"})");
    read_all(client);
  }
  auto upload = [&](const std::string& delay) { return upload_with(port_, "delay_ms", delay); };
  EXPECT_EQ(upload("400").status, 200);
  std::vector<int> delays;
  for (const server::ProcessorRequest& r : requests()) delays.push_back(r.delay_ms);
  EXPECT_EQ(delays, (std::vector<int>{160, 240, 320, 0, 400}));

  // Refused before any stream opens, naming the parameter.
  const HttpResult bad_upload = upload("1.5");
  EXPECT_EQ(bad_upload.status, 400);
  EXPECT_NE(bad_upload.body.find("invalid delay_ms '1.5'"), std::string::npos) << bad_upload.body;
  const HttpResult bad_listen =
      http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000&delay_ms=0", std::string(3200, '\0'));
  EXPECT_EQ(bad_listen.status, 400);
  EXPECT_NE(bad_listen.body.find("delay_ms"), std::string::npos) << bad_listen.body;
  {
    WsClient client(port_, "/asr?delay_ms=soon");
    const std::vector<json> messages = read_all(client);
    ASSERT_FALSE(messages.empty());
    EXPECT_NE(messages.front()["error"].get<std::string>().find("invalid delay_ms 'soon'"), std::string::npos)
        << messages.front().dump();
  }
  EXPECT_EQ(requests().size(), 5u);
}

}  // namespace
}  // namespace earshot::testing

// Deepgram's /v1/listen on the loopback server with the deterministic doubles:
// the live socket (finals, interims, SpeechStarted, UtteranceEnd, Metadata, the
// close), Token auth, bad options as an Error naming the option, client text
// messages, linear16 at another rate, and the prerecorded POST.
#include <gtest/gtest.h>

#include <fstream>

#include "audio/audio.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::string jfk_bytes() {
  std::ifstream in(EARSHOT_SHARED_DIR "/data/jfk.wav", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<json> read_all(WsClient& client) {
  std::vector<json> out;
  while (auto m = client.read()) out.push_back(*m);
  return out;
}

std::vector<json> of_type(const std::vector<json>& messages, const std::string& type) {
  std::vector<json> out;
  for (const json& m : messages)
    if (m["type"] == type) out.push_back(m);
  return out;
}

// Committed words of `samples` through a lone session with the same doubles and options.
std::vector<std::string> committed_words(const std::vector<float>& samples) {
  auto hooks = fake_hooks();
  session::StreamSession s(hooks.make_processor({"en", {}}), hooks.make_vad(), session::StreamOptions{});
  s.push_audio(samples);
  s.end_of_stream();
  while (s.has_work()) s.step();
  std::vector<std::string> out;
  for (const events::Event& e : s.events_since(0).events)
    if (const auto* committed = std::get_if<events::WordsCommitted>(&e))
      for (const Word& w : committed->words) out.push_back(w.text.substr(1));
  return out;
}

class Listen : public ServerFixture {
 protected:
  void SetUp() override {
    server::ServerConfig config;
    config.api_token = "tok";
    config.model_id = "whisper-test";
    auto hooks = fake_hooks();
    hooks.make_decoder = [] { return audio::StreamDecoder::create(); };
    start(config, hooks);
  }
  std::vector<std::pair<std::string, std::string>> auth() { return {{"Authorization", "Token tok"}}; }
};

TEST_F(Listen, LiveStreamFinalsInterimsUtteranceEndAndMetadata) {
  const std::vector<float> audio = two_phrases();
  WsClient client(port_,
                  "/v1/listen?encoding=linear16&sample_rate=16000&channels=1&interim_results=true&"
                  "utterance_end_ms=1000&vad_events=true&punctuate=true",
                  auth());
  // Paced like a live client (10x real time), so the session's state is seen between steps.
  const std::vector<int16_t> pcm = to_s16(audio);
  for (size_t i = 0; i < pcm.size(); i += 1600) {
    client.send_pcm(std::vector<int16_t>(pcm.begin() + i, pcm.begin() + std::min(pcm.size(), i + 1600)), 3200);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  client.send_text(R"({"type":"KeepAlive"})");
  client.send_text(R"({"type":"CloseStream"})");
  std::vector<json> messages = read_all(client);
  EXPECT_EQ(client.close_code(), 1000);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back()["type"], "Metadata");
  EXPECT_DOUBLE_EQ(messages.back()["duration"], 8.0);
  EXPECT_EQ(messages.back()["channels"], 1);
  EXPECT_EQ(messages.back()["sha256"].get<std::string>().size(), 64u);

  std::vector<std::string> finals;
  double until = 0;
  bool interim = false, speech_final = false;
  for (const json& m : of_type(messages, "Results")) {
    EXPECT_EQ(m["metadata"]["request_id"], messages.back()["request_id"]);
    if (!m["is_final"]) {
      interim = true;
      continue;
    }
    speech_final = speech_final || m["speech_final"].get<bool>();
    EXPECT_NEAR(m["start"].get<double>(), until, 1e-6) << "finals tile the audio";
    until = m["start"].get<double>() + m["duration"].get<double>();
    for (const json& w : m["channel"]["alternatives"][0]["words"]) finals.push_back(w["punctuated_word"]);
  }
  EXPECT_EQ(finals, committed_words(audio)) << "every committed word final once, in order";
  EXPECT_TRUE(interim);
  EXPECT_TRUE(speech_final) << "the 6 s pause is a VAD endpoint";
  std::vector<json> ends = of_type(messages, "UtteranceEnd");
  ASSERT_GE(ends.size(), 1u);
  EXPECT_LE(ends[0]["last_word_end"].get<double>(), 1.05);
  std::vector<json> starts = of_type(messages, "SpeechStarted");
  ASSERT_GE(starts.size(), 1u);
  EXPECT_TRUE(wait_idle());
}

TEST_F(Listen, Linear16AtAnotherRateIsResampled) {
  std::vector<float> at48k;
  for (float x : two_phrases())
    for (int i = 0; i < 3; ++i) at48k.push_back(x);
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=48000&token=tok");
  client.send_pcm(to_s16(at48k), 9600);
  client.send_end();  // an empty frame also ends the stream
  std::vector<json> messages = read_all(client);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back()["type"], "Metadata");
  EXPECT_NEAR(messages.back()["duration"].get<double>(), 8.0, 0.01);
  EXPECT_FALSE(of_type(messages, "Results").empty());
}

TEST_F(Listen, BadOptionsAndTokensAreRefusedByName) {
  for (const auto& [query, message] : std::vector<std::pair<std::string, std::string>>{
           {"channels=2",
            "invalid option 'channels': applies to raw audio (encoding=linear16, mulaw or alaw); a container says "
            "its own channels, mixed down to one transcript"},
           {"encoding=linear16", "invalid option 'sample_rate': required with encoding=linear16"},
           {"interim_results=true&utterance_end_ms=99",
            "invalid option 'utterance_end_ms': 99 is out of range (1000-5000)"},
           {"language=de", "invalid option 'language': unsupported language 'de': this model knows en, fr or auto"}}) {
    WsClient client(port_, "/v1/listen?" + query, auth());
    std::vector<json> messages = read_all(client);
    ASSERT_EQ(messages.size(), 1u) << query;
    EXPECT_EQ(messages[0]["type"], "Error");
    EXPECT_EQ(messages[0]["description"], message);
    EXPECT_EQ(client.close_code(), 1008);
  }
  WsClient wrong(port_, "/v1/listen", {{"Authorization", "Token nope"}});
  std::vector<json> messages = read_all(wrong);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0]["description"], "invalid or missing API token");
  EXPECT_EQ(wrong.close_code(), 1008);
  EXPECT_TRUE(wait_idle());
}

TEST_F(Listen, UnknownClientMessagesAreErrorsAndTheStreamGoesOn) {
  WsClient client(port_, "/v1/listen?encoding=linear16&sample_rate=16000", auth());
  client.send_text(R"({"type":"Configure"})");
  auto error = client.read();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["type"], "Error");
  EXPECT_EQ((*error)["description"], "unknown message type 'Configure': expected KeepAlive, Finalize or CloseStream");
  client.send_pcm(to_s16(tone(1.0, 0.2f)), 3200);
  client.send_text(R"({"type":"Finalize"})");
  client.send_text(R"({"type":"CloseStream"})");
  std::vector<json> messages = read_all(client);
  bool from_finalize = false;
  for (const json& m : of_type(messages, "Results")) from_finalize = from_finalize || m["from_finalize"].get<bool>();
  EXPECT_TRUE(from_finalize);
  EXPECT_EQ(messages.back()["type"], "Metadata");
  EXPECT_EQ(client.close_code(), 1000);
}

TEST_F(Listen, PrerecordedFileInDeepgramsShape) {
  const std::string file = jfk_bytes();
  HttpResult r = http_request(port_, "POST", "/v1/listen?punctuate=true&language=en", file,
                              {{"Authorization", "Token tok"}, {"Content-Type", "audio/wav"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_DOUBLE_EQ(j["metadata"]["duration"], 11.0);
  EXPECT_EQ(j["metadata"]["channels"], 1);
  EXPECT_EQ(j["metadata"]["sha256"].get<std::string>().size(), 64u);
  const json& alt = j["results"]["channels"][0]["alternatives"][0];
  ASSERT_FALSE(alt["words"].empty());
  std::string text;
  for (const json& w : alt["words"]) text += (text.empty() ? "" : " ") + w["punctuated_word"].get<std::string>();
  EXPECT_EQ(alt["transcript"], text);

  HttpResult bad = http_request(port_, "POST", "/v1/listen?channels=2", file, {{"Authorization", "Token tok"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["err_msg"],
            "invalid option 'channels': applies to raw audio (encoding=linear16, mulaw or alaw); a container says "
            "its own channels, mixed down to one transcript");
  EXPECT_EQ(http_request(port_, "POST", "/v1/listen", file, {{"Authorization", "Token nope"}}).status, 401);
  EXPECT_EQ(http_request(port_, "POST", "/v1/listen?token=tok", file).status, 200);
  // Bearer still works for the OpenAI route, and Token is Deepgram's alone.
  EXPECT_EQ(http_request(port_, "GET", "/v1/models", "", {{"Authorization", "Token tok"}}).status, 401);

  std::vector<int16_t> pcm = to_s16(two_phrases());
  std::string raw(reinterpret_cast<const char*>(pcm.data()), pcm.size() * 2);
  HttpResult linear = http_request(port_, "POST", "/v1/listen?encoding=linear16&sample_rate=16000", raw, auth());
  ASSERT_EQ(linear.status, 200) << linear.body;
  EXPECT_DOUBLE_EQ(json::parse(linear.body)["metadata"]["duration"], 8.0);
  EXPECT_TRUE(wait_idle());
}

}  // namespace
}  // namespace earshot::testing

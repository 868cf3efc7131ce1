// /asr against a running server on loopback with a real WebSocket client.
#include <gtest/gtest.h>

#include <future>
#include <regex>
#include <thread>

#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

class AsrPcm : public ServerFixture {
 protected:
  void SetUp() override {
    server::ServerConfig config;
    config.pcm_input = true;
    start(config);
  }
};

void expect_update_shape(const json& m) {
  for (const char* key : {"status", "lines", "buffer_transcription", "buffer_diarization", "buffer_translation",
                          "remaining_time_transcription", "remaining_time_transcription_processing",
                          "remaining_time_transcription_policy", "remaining_time_diarization"})
    EXPECT_TRUE(m.contains(key)) << key << " missing in " << m.dump();
  const std::regex time("[0-9]+:[0-5][0-9]:[0-5][0-9]\\.[0-9][0-9]");
  for (const json& line : m["lines"]) {
    EXPECT_TRUE(line["speaker"].is_number_integer());
    EXPECT_TRUE(std::regex_match(line["start"].get<std::string>(), time)) << line.dump();
    EXPECT_TRUE(std::regex_match(line["end"].get<std::string>(), time)) << line.dump();
    EXPECT_TRUE(line["text"].is_string());
    if (line["speaker"] != -2) {
      EXPECT_NE(line["text"], "");
    }
  }
}

TEST_F(AsrPcm, FullModeConfigUpdatesFinalAndReadyToStop) {
  WsClient client(port_, "/asr?language=en");
  EXPECT_EQ(client.read(), json::parse(R"({"type":"config","useAudioWorklet":true,"mode":"full"})"));
  std::vector<int16_t> pcm = to_s16(two_phrases());
  client.send_pcm(pcm, 3201);  // odd frame sizes split samples across frames
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back(), json::parse(R"({"type":"ready_to_stop"})"));
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    EXPECT_FALSE(messages[i].contains("type")) << messages[i].dump();
    expect_update_shape(messages[i]);
  }
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["status"], "active_transcription");
  EXPECT_EQ(final_update["buffer_transcription"], "");
  EXPECT_EQ(final_update["remaining_time_transcription"], 0.0);
  EXPECT_EQ(final_update["remaining_time_transcription_processing"], 0.0);
  json expected = lines_alone(from_s16(pcm));
  EXPECT_EQ(final_update["lines"], expected);
  EXPECT_EQ(expected, json::parse(R"([
    {"speaker":1,"text":" w100 w100","start":"0:00:00.00","end":"0:00:01.00","detected_language":"en"},
    {"speaker":-2,"text":"","start":"0:00:01.02","end":"0:00:06.98"},
    {"speaker":1,"text":" w286 w300","start":"0:00:06.98","end":"0:00:07.98","detected_language":"en"}])"));
  client.close();
  EXPECT_TRUE(wait_idle());
}

TEST_F(AsrPcm, DiffModeRebuildsTheSameLines) {
  WsClient client(port_, "/asr?mode=diff&language=fr");
  EXPECT_EQ(client.read(), json::parse(R"({"type":"config","useAudioWorklet":true,"mode":"diff"})"));
  std::vector<int16_t> pcm = to_s16(two_phrases(0.2f, 0.1f));
  client.send_pcm(pcm, 6400);
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  json lines = json::array();
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    const json& m = messages[i];
    EXPECT_EQ(m["seq"], i + 1);
    EXPECT_EQ(m["type"], i == 0 ? "snapshot" : "diff");
    if (i == 0) expect_update_shape(m);
    if (i > 0) {
      EXPECT_TRUE(m.contains("n_lines"));
      EXPECT_FALSE(m.contains("lines"));
      if (m.contains("new_lines")) {
        EXPECT_FALSE(m["new_lines"].empty());
      }
      if (m.contains("lines_pruned")) {
        EXPECT_GT(m["lines_pruned"], 0);
      }
    }
    apply_update(lines, m);
    EXPECT_EQ(lines.size(), m.contains("n_lines") ? m["n_lines"].get<size_t>() : m["lines"].size());
  }
  EXPECT_EQ(lines, lines_alone(from_s16(pcm), "fr"));
  EXPECT_EQ(lines[0]["detected_language"], "fr");
}

TEST_F(AsrPcm, EmptyStreamSaysNoAudioDetected) {
  WsClient client(port_, "/asr");
  client.read();
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  const json& final_update = messages[messages.size() - 2];
  EXPECT_EQ(final_update["status"], "no_audio_detected");
  EXPECT_EQ(final_update["lines"], json::array());
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
}

TEST_F(AsrPcm, InvalidModeIsAnErrorAnd4400) {
  WsClient client(port_, "/asr?mode=sideways");
  EXPECT_EQ(client.read(),
            json::parse(R"({"type":"error","error":"invalid mode 'sideways': expected 'full' or 'diff'"})"));
  EXPECT_EQ(client.read(), std::nullopt);
  EXPECT_EQ(client.close_code(), 4400);
}

TEST_F(AsrPcm, UnsupportedLanguageIsAnErrorAnd4400) {
  WsClient client(port_, "/asr?language=xx");
  EXPECT_EQ(client.read(),
            json::parse(R"({"type":"error","error":"unsupported language 'xx': this model knows en, fr or auto"})"));
  EXPECT_EQ(client.read(), std::nullopt);
  EXPECT_EQ(client.close_code(), 4400);
  EXPECT_TRUE(wait_idle());
}

TEST_F(AsrPcm, TargetLanguageWithoutTranslationIsIgnored) {
  WsClient client(port_, "/asr?target_language=de");
  EXPECT_EQ(client.read().value()["type"], "config");
  client.send_pcm(to_s16(tone(0.8, 0.1f)), 3200);
  client.send_end();
  std::vector<json> messages = client.read_until_stop();
  EXPECT_EQ(messages[messages.size() - 2]["lines"][0]["text"], " w100 p100");
  EXPECT_FALSE(messages[messages.size() - 2]["lines"][0].contains("translation"));
}

TEST_F(AsrPcm, ModelFailureIsStatusErrorAnd4400AndOthersContinue) {
  WsClient good(port_, "/asr");
  good.read();
  WsClient bad(port_, "/asr");
  bad.read();
  // The fake model refuses a window of constant 0.5 (16384 in s16).
  bad.send_pcm(std::vector<int16_t>(16000, 16384), 4000);
  std::optional<json> m;
  json last;
  while ((m = bad.read())) last = *m;
  EXPECT_EQ(last["status"], "error");
  EXPECT_EQ(last["error"], "fake model refuses a window of constant 0.5");
  EXPECT_EQ(bad.close_code(), 4400);
  std::vector<int16_t> pcm = to_s16(two_phrases());
  good.send_pcm(pcm, 3200);
  good.send_end();
  std::vector<json> messages = good.read_until_stop();
  EXPECT_EQ(messages[messages.size() - 2]["lines"], lines_alone(from_s16(pcm)));
}

TEST_F(AsrPcm, AbruptDisconnectFreesTheSession) {
  {
    WsClient client(port_, "/asr");
    client.read();
    client.send_pcm(to_s16(tone(2.0, 0.1f)), 3200);
    client.drop();
  }
  EXPECT_TRUE(wait_idle());
  WsClient next(port_, "/asr");
  EXPECT_EQ(next.read().value()["type"], "config");
  next.send_pcm(to_s16(tone(0.5, 0.2f)), 3200);
  next.send_end();
  std::vector<json> messages = next.read_until_stop();
  EXPECT_EQ(messages[messages.size() - 2]["lines"][0]["text"], " w200");
}

TEST_F(AsrPcm, ManySessionsAtOnceEachEqualToRunningAlone) {
  constexpr int kClients = 6;
  std::vector<std::future<json>> results;
  std::vector<std::vector<int16_t>> clips;
  for (int i = 0; i < kClients; ++i)
    clips.push_back(
        to_s16(concat({tone(0.5 + 0.3 * i, 0.05f * (i + 1)), silence(i % 2 ? 5.5 : 1.0), tone(1.1, 0.03f * (i + 2))})));
  for (int i = 0; i < kClients; ++i) {
    results.push_back(std::async(std::launch::async, [this, &clips, i] {
      WsClient client(port_, i % 2 ? "/asr?mode=diff" : "/asr");
      client.read();
      client.send_pcm(clips[static_cast<size_t>(i)], 1000 + 317 * static_cast<size_t>(i));
      client.send_end();
      json lines = json::array();
      for (const json& m : client.read_until_stop()) {
        if (m.contains("type") && m["type"] != "snapshot" && m["type"] != "diff") continue;
        if (m.contains("type"))
          apply_update(lines, m);
        else
          lines = m["lines"];
      }
      client.close();
      return lines;
    }));
  }
  for (int i = 0; i < kClients; ++i) {
    json lines = results[static_cast<size_t>(i)].get();
    EXPECT_EQ(lines, lines_alone(from_s16(clips[static_cast<size_t>(i)]))) << "client " << i;
    EXPECT_FALSE(lines.empty());
  }
  EXPECT_TRUE(wait_idle());
}

class AsrLimits : public ServerFixture {};

TEST_F(AsrLimits, OversizedFrameClosesThatStreamOnly) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.max_message_bytes = 64 * 1024;
  start(config);
  WsClient big(port_, "/asr");
  big.read();
  // Far more than the socket buffers hold: the server must drain it, or the peer's TCP stack
  // resets the connection and the close frame is lost.
  big.send_binary(std::vector<uint8_t>(4 * 1024 * 1024, 1));
  while (big.read()) {
  }
  EXPECT_EQ(big.close_code(), 1009);  // "message too big"
  EXPECT_EQ(big.close_reason(), "message over 65536 bytes");
  EXPECT_TRUE(wait_idle());
  WsClient next(port_, "/asr");
  next.read();
  next.send_binary(std::vector<uint8_t>(64 * 1024, 0));  // exactly the limit is fine
  next.send_end();
  std::vector<json> messages = next.read_until_stop();
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
}

TEST_F(AsrLimits, MaxSessionsRefusesClearly) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.max_sessions = 1;
  start(config);
  WsClient first(port_, "/asr");
  EXPECT_EQ(first.read().value()["type"], "config");
  WsClient second(port_, "/asr");
  EXPECT_EQ(
      second.read(),
      json::parse(
          R"({"type":"error","error":"server busy: 1 sessions already running (--max-sessions); try again later"})"));
  EXPECT_EQ(second.read(), std::nullopt);
  EXPECT_EQ(second.close_code(), 1013);
  first.send_end();
  first.read_until_stop();
  first.close();
  EXPECT_TRUE(wait_idle());
  WsClient third(port_, "/asr");
  EXPECT_EQ(third.read().value()["type"], "config");
  EXPECT_NE(server_->metrics_text().find("earshot_sessions_refused_total 1\n"), std::string::npos);
}

TEST_F(AsrLimits, TokenRequiredWhenConfigured) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.api_token = "s3cret";
  start(config);
  for (const char* target : {"/asr", "/asr?token=wrong"}) {
    WsClient client(port_, target);
    EXPECT_EQ(client.read(), std::nullopt) << target;
    EXPECT_EQ(client.close_code(), 4401) << target;
    EXPECT_EQ(client.close_reason(), "invalid or missing API token");
  }
  WsClient by_query(port_, "/asr?token=s3cret");
  EXPECT_EQ(by_query.read().value()["type"], "config");
  WsClient by_header(port_, "/asr", {{"Authorization", "Bearer s3cret"}});
  EXPECT_EQ(by_header.read().value()["type"], "config");
}

TEST_F(AsrLimits, IdleStreamIsEndedWithItsFinalUpdate) {
  server::ServerConfig config;
  config.pcm_input = true;
  config.idle_timeout_seconds = 0.3;
  start(config);
  WsClient client(port_, "/asr");
  client.read();
  client.send_pcm(to_s16(tone(0.6, 0.1f)), 3200);
  std::vector<json> messages = client.read_until_stop();
  ASSERT_GE(messages.size(), 2u);
  EXPECT_EQ(messages.back()["type"], "ready_to_stop");
  EXPECT_EQ(messages[messages.size() - 2]["lines"][0]["text"], " w100 p100");
  EXPECT_EQ(client.read(), std::nullopt);
  EXPECT_EQ(client.close_code(), 1000);
  EXPECT_EQ(client.close_reason(), "idle timeout");
}

TEST_F(AsrLimits, GracefulShutdownSendsFinalUpdateAndReadyToStop) {
  server::ServerConfig config;
  config.pcm_input = true;
  start(config);
  WsClient a(port_, "/asr"), b(port_, "/asr?mode=diff");
  a.read();
  b.read();
  a.send_pcm(to_s16(tone(1.3, 0.1f)), 3200);
  b.send_pcm(to_s16(tone(0.7, 0.2f)), 3200);
  // Wait until the server has taken in all the audio (its first full window is committed).
  std::vector<json> ma, mb;
  json lines_b = json::array();
  while (ma.empty() || ma.back()["lines"].empty() || ma.back()["lines"][0]["text"] != " w100 w100")
    ma.push_back(a.read().value());
  while (lines_b.empty() || lines_b[0]["text"] != " w200") {
    mb.push_back(b.read().value());
    apply_update(lines_b, mb.back());
  }
  // Both streams are still open (no end frame) when the server is asked to stop.
  std::thread stopper([this] { server_->shutdown(); });
  for (const json& m : a.read_until_stop()) ma.push_back(m);
  for (const json& m : b.read_until_stop()) mb.push_back(m);
  EXPECT_EQ(ma.back()["type"], "ready_to_stop");
  EXPECT_EQ(mb.back()["type"], "ready_to_stop");
  EXPECT_EQ(ma[ma.size() - 2]["lines"][0]["text"], " w100 w100 p100");
  json lines = json::array();
  for (const json& m : mb) apply_update(lines, m);
  EXPECT_EQ(lines[0]["text"], " w200 p200");
  EXPECT_EQ(a.read(), std::nullopt);
  EXPECT_EQ(a.close_code(), 1001);
  EXPECT_EQ(b.read(), std::nullopt);
  EXPECT_EQ(b.close_code(), 1001);
  stopper.join();
}

}  // namespace
}  // namespace earshot::testing

// OpenAI Realtime transcription sessions as pure code: both update shapes (the
// current session.update with a transcription session, and the beta
// transcription_session.update) into one configuration and back into the
// session objects clients read, bad values refused naming the field, the
// settings a model stream was opened with locked, client events and base64.
#include <gtest/gtest.h>

#include "protocol/openai_realtime/session.h"

namespace earshot::openai_realtime {
namespace {

using nlohmann::json;

RealtimeError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RealtimeError& e) {
    return e;
  }
  ADD_FAILURE() << "no RealtimeError";
  return RealtimeError("", "");
}

TEST(RealtimeSession, TheCurrentShapeConfiguresEverything) {
  SessionConfig c;
  c.id = "sess_1";
  c.model = "whisper-1";
  const json update = json::parse(R"({
    "type": "transcription",
    "audio": {"input": {
      "format": {"type": "audio/pcmu"},
      "transcription": {"model": "gpt-4o-transcribe", "language": "en-US", "prompt": "earshot, ggml",
                        "keywords": ["Parakeet"]},
      "noise_reduction": {"type": "near_field"},
      "turn_detection": {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200, "silence_duration_ms": 350,
                         "create_response": false}}},
    "include": ["item.input_audio_transcription.logprobs"],
    "something_new": 1})");
  apply_update(c, update, Dialect::kCurrent, false);
  EXPECT_EQ(c.format, AudioFormat::kPcmu);
  EXPECT_EQ(sample_rate_of(c.format), 8000);
  EXPECT_EQ(c.model, "gpt-4o-transcribe");
  EXPECT_EQ(c.language, "en");
  EXPECT_EQ(c.turn.type, TurnType::kServerVad);
  EXPECT_EQ(c.turn.silence_duration_ms, 350);
  EXPECT_TRUE(c.logprobs);
  const Keyterms k = c.keyterms();
  EXPECT_EQ(k.prompt, "earshot, ggml");
  ASSERT_EQ(k.terms.size(), 1u);
  EXPECT_EQ(k.terms[0].text, "Parakeet");

  const json s = session_json(c, Dialect::kCurrent);
  EXPECT_EQ(s["type"], "transcription");
  EXPECT_EQ(s["id"], "sess_1");
  EXPECT_EQ(s["audio"]["input"]["format"], (json{{"type", "audio/pcmu"}}));
  EXPECT_EQ(s["audio"]["input"]["transcription"]["language"], "en");
  EXPECT_EQ(s["audio"]["input"]["transcription"]["prompt"], "earshot, ggml");
  EXPECT_EQ(s["audio"]["input"]["noise_reduction"], (json{{"type", "near_field"}}));
  EXPECT_EQ(s["audio"]["input"]["turn_detection"], (json{{"type", "server_vad"},
                                                         {"threshold", 0.6},
                                                         {"prefix_padding_ms", 200},
                                                         {"silence_duration_ms", 350},
                                                         {"create_response", false}}));
  EXPECT_EQ(s["include"], json::array({"item.input_audio_transcription.logprobs"}));

  // Only what an update names changes; null turns detection off; semantic_vad takes its eagerness.
  apply_update(c, json::parse(R"({"audio": {"input": {"turn_detection": null}}})"), Dialect::kCurrent, false);
  EXPECT_EQ(c.turn.type, TurnType::kNone);
  EXPECT_EQ(c.format, AudioFormat::kPcmu);
  EXPECT_TRUE(session_json(c, Dialect::kCurrent)["audio"]["input"]["turn_detection"].is_null());
  apply_update(c, json::parse(R"({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high"},
                                                     "format": {"type": "audio/pcm", "rate": 24000}}}})"),
               Dialect::kCurrent, false);
  EXPECT_EQ(c.turn.type, TurnType::kSemanticVad);
  EXPECT_EQ(c.turn.eagerness, "high");
  EXPECT_EQ(c.format, AudioFormat::kPcm16);
  EXPECT_EQ(session_json(c, Dialect::kCurrent)["audio"]["input"]["format"],
            (json{{"type", "audio/pcm"}, {"rate", 24000}}));
}

TEST(RealtimeSession, TheBetaShapeConfiguresTheSameAndAnswersInItsShape) {
  SessionConfig c;
  c.id = "sess_2";
  apply_update(c, json::parse(R"({
    "input_audio_format": "g711_alaw",
    "input_audio_transcription": {"model": "whisper-1", "language": "fr", "prompt": "Bonjour"},
    "turn_detection": {"type": "server_vad", "silence_duration_ms": 800},
    "include": []})"),
               Dialect::kBeta, false);
  EXPECT_EQ(c.format, AudioFormat::kPcma);
  EXPECT_EQ(c.language, "fr");
  EXPECT_EQ(c.turn.silence_duration_ms, 800);
  EXPECT_EQ(c.turn.threshold, 0.5);  // the default
  const json s = session_json(c, Dialect::kBeta);
  EXPECT_EQ(s["object"], "realtime.transcription_session");
  EXPECT_EQ(s["input_audio_format"], "g711_alaw");
  EXPECT_EQ(s["input_audio_transcription"]["prompt"], "Bonjour");
  EXPECT_EQ(s["turn_detection"]["silence_duration_ms"], 800);
  EXPECT_EQ(s["include"], json::array());
}

TEST(RealtimeSession, BadValuesAreRefusedNamingTheField) {
  SessionConfig c;
  const SessionConfig before = c;
  struct Case {
    const char* update;
    const char* param;
  };
  for (const Case& k : std::vector<Case>{
           {R"({"type": "realtime"})", "session.type"},
           {R"({"audio": {"input": {"format": {"type": "audio/opus"}}}})", "session.audio.input.format.type"},
           {R"({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}})",
            "session.audio.input.format.rate"},
           {R"({"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 2}}}})",
            "session.audio.input.turn_detection.threshold"},
           {R"({"audio": {"input": {"turn_detection": {"type": "push_to_talk"}}}})",
            "session.audio.input.turn_detection.type"},
           {R"({"audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "eager"}}}})",
            "session.audio.input.turn_detection.eagerness"},
           {R"({"audio": {"input": {"transcription": {"language": "english!"}}}})",
            "session.audio.input.transcription.language"},
           {R"({"include": ["item.audio"]})", "session.include[]"},
       }) {
    const RealtimeError e = error_of([&] { apply_update(c, json::parse(k.update), Dialect::kCurrent, false); });
    EXPECT_EQ(e.param(), k.param) << k.update << ": " << e.what();
    EXPECT_EQ(e.code(), "invalid_value");
    EXPECT_NE(std::string(e.what()).find(k.param), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.turn.type, before.turn.type);  // unchanged by a refused update
  EXPECT_EQ(error_of([&] {
              apply_update(c, json::parse(R"({"input_audio_format": "opus"})"), Dialect::kBeta, false);
            }).param(),
            "session.input_audio_format");
  // A prompt over the limit.
  json big = {{"audio", {{"input", {{"transcription", {{"prompt", std::string(5000, 'a')}}}}}}}};
  EXPECT_NE(std::string(error_of([&] { apply_update(c, big, Dialect::kCurrent, false); }).what()).find("4096"),
            std::string::npos);
}

TEST(RealtimeSession, TheOpenStreamsSettingsAreLockedOnceAudioStarted) {
  SessionConfig c;
  c.language = "en";
  EXPECT_EQ(error_of([&] {
              apply_update(c, json::parse(R"({"audio": {"input": {"format": {"type": "audio/pcmu"}}}})"),
                           Dialect::kCurrent, true);
            }).code(),
            "session_locked");
  EXPECT_EQ(error_of([&] {
              apply_update(c, json::parse(R"({"input_audio_transcription": {"prompt": "new words"}})"), Dialect::kBeta,
                           true);
            }).param(),
            "session.input_audio_transcription.prompt");
  // Turn detection and the same values again may still come.
  apply_update(c, json::parse(R"({"audio": {"input": {"transcription": {"language": "en"},
                                                     "turn_detection": {"type": "server_vad", "silence_duration_ms": 900}}}})"),
               Dialect::kCurrent, true);
  EXPECT_EQ(c.turn.silence_duration_ms, 900);
}

TEST(RealtimeEvents, ClientEventsAreReadByType) {
  ClientEvent e = parse_client_event(R"({"type": "input_audio_buffer.append", "audio": "AAE=", "event_id": "c1"})");
  EXPECT_EQ(e.kind, ClientEvent::Kind::kAppend);
  EXPECT_EQ(e.event_id, "c1");
  EXPECT_EQ(decode_base64(e.audio, "audio"), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(parse_client_event(R"({"type": "input_audio_buffer.commit"})").kind, ClientEvent::Kind::kCommit);
  EXPECT_EQ(parse_client_event(R"({"type": "input_audio_buffer.clear"})").kind, ClientEvent::Kind::kClear);
  EXPECT_EQ(parse_client_event(R"({"type": "transcription_session.update", "session": {}})").kind,
            ClientEvent::Kind::kTranscriptionSessionUpdate);
  EXPECT_EQ(parse_client_event(R"({"type": "response.create"})").kind, ClientEvent::Kind::kUnknown);
  EXPECT_EQ(error_of([] { parse_client_event("not json"); }).code(), "invalid_json");
  EXPECT_EQ(error_of([] { parse_client_event(R"({"event_id": "x"})"); }).code(), "missing_type");
  EXPECT_EQ(error_of([] { parse_client_event(R"({"type": "session.update"})"); }).param(), "session");
  EXPECT_EQ(error_of([] { parse_client_event(R"({"type": "input_audio_buffer.append"})"); }).param(), "audio");
}

TEST(RealtimeEvents, Base64RoundTripsEveryLength) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t n = 0; n < 40; ++n) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
    std::string text;
    for (size_t i = 0; i < n; i += 3) {
      const uint32_t v = (bytes[i] << 16) | ((i + 1 < n ? bytes[i + 1] : 0) << 8) | (i + 2 < n ? bytes[i + 2] : 0);
      text += alphabet[(v >> 18) & 63];
      text += alphabet[(v >> 12) & 63];
      text += i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
      text += i + 2 < n ? alphabet[v & 63] : '=';
    }
    EXPECT_EQ(decode_base64(text, "audio"), bytes) << n;
  }
  EXPECT_EQ(error_of([] { decode_base64("AA$A", "audio"); }).param(), "audio");
  EXPECT_THROW(decode_base64("AAAAA", "audio"), RealtimeError);
}

TEST(RealtimeEvents, ErrorsHaveOpenAIsShape) {
  Ids ids("t");
  const json e = error_event(ids, "invalid_request_error", "invalid_value", "bad \xff", "session.type", "c7");
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["event_id"], "event_t1");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], "invalid_value");
  EXPECT_EQ(e["error"]["param"], "session.type");
  EXPECT_EQ(e["error"]["event_id"], "c7");
  EXPECT_NO_THROW(e.dump());  // the message made valid UTF-8
  const json bare = error_event(ids, "server_error", "", "x");
  EXPECT_TRUE(bare["error"]["code"].is_null());
  EXPECT_TRUE(bare["error"]["param"].is_null());
  EXPECT_TRUE(bare["error"]["event_id"].is_null());
}

}  // namespace
}  // namespace earshot::openai_realtime

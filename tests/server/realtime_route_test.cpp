// OpenAI's Realtime transcription session at /v1/realtime on the loopback server,
// driven by a client written from OpenAI's API reference (events as JSON text,
// base64 audio) with the deterministic doubles: session.created/updated in both
// shapes, server_vad items from the VAD and the silence (and from a turn
// stage's TurnStarted/TurnEnded when one runs), client commits and clears
// without turn detection, G.711 audio, the prompt and turn settings reaching the
// model and the stages, errors in OpenAI's shape, token auth and the intent.
#include <gtest/gtest.h>

#include <mutex>

#include "audio/raw_decoder.h"
#include "common/text.h"
#include "server/core.h"
#include "test_support.h"

namespace earshot::testing {
namespace {

using nlohmann::json;

std::string base64(const std::vector<uint8_t>& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t v =
        (bytes[i] << 16) | ((i + 1 < bytes.size() ? bytes[i + 1] : 0) << 8) | (i + 2 < bytes.size() ? bytes[i + 2] : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// PCM16 at `rate`: a square wave of `amplitude` (the fakes' speech; 0 = silence).
std::vector<uint8_t> pcm16(double seconds, int rate, int16_t amplitude) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < static_cast<size_t>(seconds * rate); ++i) {
    const int16_t s = (i / 15) % 2 ? amplitude : static_cast<int16_t>(-amplitude);
    out.push_back(static_cast<uint8_t>(s & 0xFF));
    out.push_back(static_cast<uint8_t>((s >> 8) & 0xFF));
  }
  return out;
}
std::vector<uint8_t> join(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void append(WsClient& client, const std::vector<uint8_t>& bytes, size_t chunk = 9600) {
  for (size_t i = 0; i < bytes.size(); i += chunk) {
    const std::vector<uint8_t> part(bytes.begin() + i, bytes.begin() + std::min(bytes.size(), i + chunk));
    client.send_text(json{{"type", "input_audio_buffer.append"}, {"audio", base64(part)}}.dump());
  }
}

// Messages until `done` holds for one (included) or the server closes.
std::vector<json> read_until(WsClient& client, const std::function<bool(const json&)>& done) {
  std::vector<json> out;
  while (auto m = client.read()) {
    out.push_back(*m);
    if (done(*m)) break;
  }
  return out;
}
auto type_is(const std::string& type) {
  return [type](const json& m) { return m["type"] == type; };
}
// Reads until `n` items completed.
std::vector<json> until_completed(WsClient& client, int n) {
  int seen = 0;
  return read_until(client, [&](const json& m) {
    return m["type"] == "conversation.item.input_audio_transcription.completed" && ++seen == n;
  });
}

// The text the doubles commit for `bytes` decoded alone (no VAD pauses inside).
std::string text_alone(const std::vector<uint8_t>& bytes, audio::RawEncoding encoding, int rate) {
  audio::RawDecoder decoder(encoding, rate);
  std::vector<float> pcm = decoder.push(bytes);
  const std::vector<float> tail = decoder.finish();
  pcm.insert(pcm.end(), tail.begin(), tail.end());
  auto hooks = fake_hooks();
  session::StreamSession s(hooks.make_processor({"en", {}}), hooks.make_vad(), session::StreamOptions{});
  s.push_audio(pcm);
  s.end_of_stream();
  while (s.has_work()) s.step();
  std::string out;
  for (const events::Event& e : s.events_since(0).events)
    if (const auto* c = std::get_if<events::WordsCommitted>(&e))
      for (const Word& w : c->words) out += w.text;
  return trim(out);
}

const std::string kCompleted = "conversation.item.input_audio_transcription.completed";
const std::string kDelta = "conversation.item.input_audio_transcription.delta";

// Records what the streams asked of the model and of the stages.
class Realtime : public ServerFixture {
 protected:
  void start_with(server::ServerConfig config = {}, std::function<std::unique_ptr<stages::Stage>()> stage = {}) {
    config.idle_timeout_seconds = 20;  // bounds a test that waits for what never comes
    config.model_id = "whisper-test";
    auto hooks = fake_hooks();
    auto fake = hooks.make_processor;
    hooks.make_processor = [this, fake](const server::ProcessorRequest& r) {
      std::lock_guard lock(mutex_);
      requests_.push_back(r);
      return fake(r);
    };
    hooks.make_stages = [this, stage](const stages::StreamRequest& r) {
      std::lock_guard lock(mutex_);
      stage_params_.push_back(r.params);
      std::vector<std::unique_ptr<stages::Stage>> chain;
      if (stage) chain.push_back(stage());
      return chain;
    };
    start(config, hooks);
  }
  std::mutex mutex_;
  std::vector<server::ProcessorRequest> requests_;
  std::vector<std::map<std::string, std::string>> stage_params_;
};

TEST_F(Realtime, SessionCreatedThenUpdatedInTheShapeOfEachUpdate) {
  start_with();
  WsClient client(port_, "/v1/realtime?intent=transcription");
  const std::optional<json> created = client.read();
  ASSERT_TRUE(created);
  EXPECT_EQ((*created)["type"], "session.created");
  const json& s = (*created)["session"];
  EXPECT_EQ(s["type"], "transcription");
  EXPECT_EQ(s["id"].get<std::string>().rfind("sess_", 0), 0u);
  EXPECT_EQ(s["audio"]["input"]["format"], (json{{"type", "audio/pcm"}, {"rate", 24000}}));
  EXPECT_EQ(s["audio"]["input"]["transcription"]["model"], "whisper-test");
  EXPECT_EQ(s["audio"]["input"]["turn_detection"]["type"], "server_vad");

  client.send_text(R"({"type":"session.update","event_id":"u1","session":{"type":"transcription","audio":{"input":{
      "transcription":{"model":"gpt-4o-transcribe","language":"fr","prompt":"earshot"},
      "turn_detection":{"type":"semantic_vad","eagerness":"low"}}}}})");
  std::optional<json> updated = client.read();
  ASSERT_TRUE(updated);
  EXPECT_EQ((*updated)["type"], "session.updated");
  EXPECT_EQ((*updated)["session"]["id"], s["id"]);
  EXPECT_EQ((*updated)["session"]["audio"]["input"]["transcription"],
            (json{{"model", "gpt-4o-transcribe"}, {"language", "fr"}, {"prompt", "earshot"}}));
  EXPECT_EQ((*updated)["session"]["audio"]["input"]["turn_detection"],
            (json{{"type", "semantic_vad"}, {"eagerness", "low"}}));

  client.send_text(R"({"type":"transcription_session.update","session":{"input_audio_format":"g711_alaw",
      "turn_detection":null}})");
  updated = client.read();
  ASSERT_TRUE(updated);
  EXPECT_EQ((*updated)["type"], "transcription_session.updated");
  EXPECT_EQ((*updated)["session"]["input_audio_format"], "g711_alaw");
  EXPECT_TRUE((*updated)["session"]["turn_detection"].is_null());
  EXPECT_EQ((*updated)["session"]["input_audio_transcription"]["language"], "fr");
  client.close();
}

TEST_F(Realtime, ServerVadItemsAreTheSpeechAndTheSilenceAfterIt) {
  start_with();
  WsClient client(port_, "/v1/realtime?intent=transcription&model=gpt-4o-transcribe");
  client.read();
  client.send_text(R"({"type":"session.update","session":{"type":"transcription","audio":{"input":{
      "format":{"type":"audio/pcm","rate":24000},
      "turn_detection":{"type":"server_vad","threshold":0.5,"prefix_padding_ms":300,"silence_duration_ms":300}}}}})");
  ASSERT_EQ((*client.read())["type"], "session.updated");
  const std::vector<uint8_t> all =
      join({pcm16(1.2, 24000, 3000), pcm16(2.0, 24000, 0), pcm16(1.0, 24000, 9000), pcm16(2.0, 24000, 0)});
  append(client, all);
  const std::vector<json> messages = until_completed(client, 2);
  std::vector<std::string> items, transcripts;
  std::map<std::string, std::vector<std::string>> order;
  std::map<std::string, std::string> deltas;
  std::string previous;
  for (const json& m : messages) {
    if (!m.contains("item_id") && !m.contains("item")) continue;
    const std::string id = m.contains("item_id") ? m["item_id"] : m["item"]["id"];
    if (order[id].empty()) items.push_back(id);
    order[id].push_back(m["type"]);
    EXPECT_EQ(m["event_id"].get<std::string>().rfind("event_", 0), 0u);
    if (m["type"] == kDelta) deltas[id] += m["delta"].get<std::string>();
    if (m["type"] == "input_audio_buffer.committed") {
      EXPECT_EQ(m["previous_item_id"], previous.empty() ? json(nullptr) : json(previous));
      previous = id;
    }
    if (m["type"] == kCompleted) {
      transcripts.push_back(m["transcript"]);
      EXPECT_EQ(m["transcript"], deltas[id]) << "the deltas spell the transcript";
      EXPECT_EQ(m["usage"]["type"], "duration");
    }
    if (m["type"] == "input_audio_buffer.speech_started") {
      // The VAD's start (512-sample windows) less the 300 ms padding: 3.2 s -> 2.9 s.
      EXPECT_NEAR(m["audio_start_ms"].get<double>(), items.size() == 1 ? 0 : 2900, 40);
    }
  }
  ASSERT_EQ(items.size(), 2u);
  for (const std::string& id : items) {
    const std::vector<std::string>& o = order[id];
    ASSERT_GE(o.size(), 6u) << id;
    EXPECT_EQ(o.front(), "input_audio_buffer.speech_started");
    const auto at = [&](const std::string& t) { return std::find(o.begin(), o.end(), t) - o.begin(); };
    EXPECT_LT(at(kDelta), at("input_audio_buffer.speech_stopped"));  // deltas while the item is spoken
    EXPECT_LT(at("input_audio_buffer.speech_stopped"), at("input_audio_buffer.committed"));
    EXPECT_LT(at("input_audio_buffer.committed"), at("conversation.item.created"));
    EXPECT_EQ(o.back(), kCompleted);
  }
  // The items hold every word the stream commits, each once, in order.
  EXPECT_EQ(transcripts[0] + " " + transcripts[1], text_alone(all, audio::RawEncoding::kLinear16, 24000));
  EXPECT_NE(transcripts[0].find("w90"), std::string::npos);
  EXPECT_EQ(transcripts[0].find("w269"), std::string::npos);
  client.close();
}

TEST_F(Realtime, WithoutTurnDetectionTheClientCommitsAndClears) {
  start_with();
  WsClient client(port_, "/v1/realtime?intent=transcription");
  client.read();
  client.send_text(R"({"type":"session.update","session":{"type":"transcription","audio":{"input":{
      "turn_detection":null}},"include":["item.input_audio_transcription.logprobs"]}})");
  client.read();
  client.send_text(R"({"type":"input_audio_buffer.commit","event_id":"c0"})");
  std::optional<json> e = client.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  EXPECT_EQ((*e)["error"]["code"], "input_audio_buffer_commit_empty");
  EXPECT_EQ((*e)["error"]["event_id"], "c0");

  const std::vector<uint8_t> speech = pcm16(1.5, 24000, 4000);
  append(client, speech);
  client.send_text(R"({"type":"input_audio_buffer.commit"})");
  std::vector<json> messages = until_completed(client, 1);
  std::vector<std::string> types;
  for (const json& m : messages) types.push_back(m["type"]);
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(std::count(types.begin(), types.end(), "input_audio_buffer.speech_started"), 0);  // no VAD events
  const json& completed = messages.back();
  EXPECT_EQ(completed["transcript"], text_alone(speech, audio::RawEncoding::kLinear16, 24000));
  EXPECT_TRUE(completed["logprobs"].is_array());

  // Clear: the buffered audio's words never come; the next commit has only what followed.
  append(client, pcm16(1.0, 24000, 7000));
  client.send_text(R"({"type":"input_audio_buffer.clear"})");
  const std::vector<uint8_t> after = pcm16(1.0, 24000, 2000);
  append(client, after);
  client.send_text(R"({"type":"input_audio_buffer.commit"})");
  messages = until_completed(client, 1);
  EXPECT_EQ(std::count_if(messages.begin(), messages.end(), type_is("input_audio_buffer.cleared")), 1);
  EXPECT_EQ(messages.back()["transcript"], text_alone(after, audio::RawEncoding::kLinear16, 24000));
  client.close();
}

TEST_F(Realtime, G711AudioInTheBetaShape) {
  start_with();
  WsClient client(port_, "/v1/realtime?intent=transcription");
  client.read();
  client.send_text(R"({"type":"transcription_session.update","session":{"input_audio_format":"g711_ulaw",
      "input_audio_transcription":{"model":"whisper-1","language":"en"},"turn_detection":null}})");
  EXPECT_EQ((*client.read())["type"], "transcription_session.updated");
  std::vector<uint8_t> ulaw;
  for (size_t i = 0; i < 12000; ++i) ulaw.push_back((i / 8) % 2 ? 0x9F : 0x1F);  // +-~4000 at 8 kHz
  append(client, ulaw, 1600);
  client.send_text(R"({"type":"input_audio_buffer.commit"})");
  const std::vector<json> messages = until_completed(client, 1);
  EXPECT_EQ(messages.back()["transcript"], text_alone(ulaw, audio::RawEncoding::kMulaw, 8000));
  EXPECT_FALSE(messages.back()["transcript"].get<std::string>().empty());
  client.close();
}

TEST_F(Realtime, ThePromptAndTheTurnSettingsReachTheModelAndTheStages) {
  server::ServerConfig config;
  config.keyterms.add("Nemotron");
  start_with(config);
  WsClient client(port_, "/v1/realtime?intent=transcription");
  client.read();
  client.send_text(R"({"type":"session.update","session":{"type":"transcription","audio":{"input":{
      "transcription":{"model":"gpt-4o-transcribe","prompt":"Expect earshot.","keywords":["ggml"]},
      "turn_detection":{"type":"server_vad","threshold":0.7,"prefix_padding_ms":250,"silence_duration_ms":350}}}}})");
  client.read();
  append(client, pcm16(0.2, 24000, 0));
  // Locked now: the language, format and prompt the stream was opened with.
  client.send_text(R"({"type":"session.update","session":{"audio":{"input":{"transcription":{"language":"fr"}}}}})");
  std::optional<json> e = client.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["error"]["code"], "session_locked");
  EXPECT_EQ((*e)["error"]["param"], "session.audio.input.transcription.language");
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mutex_);
    return !requests_.empty();
  }));
  std::lock_guard lock(mutex_);
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(requests_[0].keyterms.prompt, "Expect earshot.");
  ASSERT_EQ(requests_[0].keyterms.terms.size(), 2u);
  EXPECT_EQ(requests_[0].keyterms.terms[0].text, "Nemotron");
  EXPECT_EQ(requests_[0].keyterms.terms[1].text, "ggml");
  ASSERT_EQ(stage_params_.size(), 1u);
  EXPECT_EQ(stage_params_[0], (std::map<std::string, std::string>{{"turn_detection", "server_vad"},
                                                                  {"turn_threshold", "0.7"},
                                                                  {"turn_prefix_padding_ms", "250"},
                                                                  {"turn_silence_ms", "350"}}));
}

TEST_F(Realtime, TheStreamDelayInTheUrlReachesTheModel) {
  start_with();
  {
    WsClient client(port_, "/v1/realtime?intent=transcription&delay_ms=480");
    client.read();
    append(client, pcm16(0.2, 24000, 0));
    ASSERT_TRUE(eventually([&] {
      std::lock_guard lock(mutex_);
      return !requests_.empty();
    }));
    client.close();
  }
  {
    std::lock_guard lock(mutex_);
    EXPECT_EQ(requests_.at(0).delay_ms, 480);
  }
  // Not a whole number of ms: refused before the session starts, naming the parameter.
  WsClient bad(port_, "/v1/realtime?intent=transcription&delay_ms=-80");
  std::optional<json> e = bad.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error");
  EXPECT_NE((*e)["error"]["message"].get<std::string>().find("'delay_ms'"), std::string::npos) << e->dump();
}

// A turn stage's stand-in: a turn is each speech segment, ended when it ends.
class ScriptedTurns : public stages::Stage {
 public:
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    emit(event);
    if (const auto* s = std::get_if<events::SpeechStarted>(&event)) emit(events::TurnStarted{turn_, s->at});
    if (const auto* s = std::get_if<events::SpeechEnded>(&event)) emit(events::TurnEnded{turn_++, s->at, 1.0, {}});
  }

 private:
  int turn_ = 0;
};

TEST_F(Realtime, WithATurnStageItemsAreItsTurns) {
  server::ServerConfig config;
  config.stages = {"turns"};
  start_with(config, [] { return std::make_unique<ScriptedTurns>(); });
  WsClient client(port_, "/v1/realtime?intent=transcription");
  client.read();
  // A silence far longer than the pauses: without the stage's TurnEnded no item would end.
  client.send_text(R"({"type":"session.update","session":{"type":"transcription","audio":{"input":{
      "turn_detection":{"type":"server_vad","silence_duration_ms":60000}}}}})");
  client.read();
  append(client, join({pcm16(1.0, 24000, 3000), pcm16(1.0, 24000, 0), pcm16(1.0, 24000, 8000), pcm16(1.0, 24000, 0)}));
  const std::vector<json> messages = until_completed(client, 2);
  EXPECT_EQ(std::count_if(messages.begin(), messages.end(), type_is("input_audio_buffer.speech_stopped")), 2);
  EXPECT_EQ(std::count_if(messages.begin(), messages.end(), type_is(kCompleted)), 2);
  client.close();
}

// Records the settings changes that reach the chain (a turn stage's view).
class SettingsRecorder : public stages::Stage {
 public:
  explicit SettingsRecorder(std::function<void(const events::SettingsChanged&)> seen) : seen_(std::move(seen)) {}
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (const auto* c = std::get_if<events::SettingsChanged>(&event)) seen_(*c);
    emit(event);
  }
  std::map<std::string, std::string> check_settings(const std::map<std::string, std::string>& params) const override {
    if (params.count("turn_silence_ms") && params.at("turn_silence_ms") == "1234")
      throw Error(ErrorCode::kInvalidArgument, "invalid parameter 'turn_silence_ms': out of range");
    return params;
  }

 private:
  std::function<void(const events::SettingsChanged&)> seen_;
};

TEST_F(Realtime, TurnDetectionChangesWhileTheStreamRuns) {
  std::vector<events::SettingsChanged> changes;
  server::ServerConfig config;
  config.stages = {"turns"};
  start_with(config, [&] {
    return std::make_unique<SettingsRecorder>([&](const events::SettingsChanged& c) {
      std::lock_guard lock(mutex_);
      changes.push_back(c);
    });
  });
  WsClient client(port_, "/v1/realtime?intent=transcription");
  client.read();
  append(client, pcm16(0.5, 24000, 0));
  client.send_text(R"({"type":"session.update","session":{"audio":{"input":{
      "turn_detection":{"type":"server_vad","silence_duration_ms":700}}}}})");
  std::optional<json> updated = client.read();
  ASSERT_TRUE(updated);
  EXPECT_EQ((*updated)["type"], "session.updated") << updated->dump();
  EXPECT_EQ((*updated)["session"]["audio"]["input"]["turn_detection"]["silence_duration_ms"], 700);
  // A set the stage refuses is an error naming turn detection; the session keeps its settings.
  client.send_text(R"({"type":"session.update","session":{"audio":{"input":{
      "turn_detection":{"type":"server_vad","silence_duration_ms":1234}}}}})");
  std::optional<json> refused = client.read();
  ASSERT_TRUE(refused);
  EXPECT_EQ((*refused)["type"], "error") << refused->dump();
  EXPECT_EQ((*refused)["error"]["param"], "session.audio.input.turn_detection");
  append(client, pcm16(0.5, 24000, 0));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mutex_);
    return !changes.empty();
  }));
  std::lock_guard lock(mutex_);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].params.at("turn_silence_ms"), "700");
  // At the audio appended before the update (less what the 24 to 16 kHz resampler still held).
  EXPECT_NEAR(changes[0].at, 0.5, 0.005);
}

TEST_F(Realtime, ErrorsHaveOpenAIsShapeAndTheSessionGoesOn) {
  start_with();
  WsClient client(port_, "/v1/realtime");  // the official client's URL has no intent: transcription is all there is
  client.read();
  auto error_for = [&](const std::string& text) {
    client.send_text(text);
    const std::optional<json> e = client.read();
    EXPECT_TRUE(e && (*e)["type"] == "error") << text;
    return e ? (*e)["error"] : json();
  };
  json e = error_for(R"({"type":"session.update","event_id":"x1","session":{"type":"realtime"}})");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "session.type");
  EXPECT_EQ(e["event_id"], "x1");
  e = error_for(R"({"type":"session.update","session":{"audio":{"input":{"transcription":{"language":"de"}}}}})");
  EXPECT_EQ(e["param"], "session.audio.input.transcription.language");
  EXPECT_NE(e["message"].get<std::string>().find("this model knows en, fr"), std::string::npos);
  EXPECT_EQ(error_for(R"({"type":"response.create"})")["code"], "invalid_event");
  EXPECT_EQ(error_for(R"({"type":"input_audio_buffer.append","audio":"!!"})")["param"], "audio");
  EXPECT_EQ(error_for("[]")["code"], "invalid_json");
  client.send_binary({1, 2, 3});
  std::optional<json> binary = client.read();
  ASSERT_TRUE(binary);
  EXPECT_EQ((*binary)["error"]["code"], "invalid_event");
  client.send_text(R"({"type":"session.update","session":{"type":"transcription"}})");
  EXPECT_EQ((*client.read())["type"], "session.updated");
  client.close();
}

TEST_F(Realtime, TokenAndIntentAreChecked) {
  server::ServerConfig config;
  config.api_token = "tok";
  start_with(config);
  {
    WsClient client(port_, "/v1/realtime?intent=transcription");
    const std::optional<json> e = client.read();
    ASSERT_TRUE(e);
    EXPECT_EQ((*e)["error"]["code"], "invalid_api_key");
    EXPECT_FALSE(client.read());
    EXPECT_EQ(client.close_code(), 1008);
  }
  {
    WsClient client(port_, "/v1/realtime?intent=conversation", {{"Authorization", "Bearer tok"}});
    const std::optional<json> e = client.read();
    ASSERT_TRUE(e);
    EXPECT_NE((*e)["error"]["message"].get<std::string>().find("intent=transcription"), std::string::npos);
    EXPECT_FALSE(client.read());
    EXPECT_EQ(client.close_code(), 1008);
  }
  WsClient ok(port_, "/v1/realtime?intent=transcription", {{"Authorization", "Bearer tok"}});
  EXPECT_EQ((*ok.read())["type"], "session.created");
  ok.close();
  WsClient query(port_, "/v1/realtime?intent=transcription&token=tok");
  EXPECT_EQ((*query.read())["type"], "session.created");
  query.close();
}

// The shutdown grace ends while a model pass runs: the final result waits for that
// pass, and the open item's transcript carries its words.
class RealtimeShutdown : public ServerFixture {};

TEST_F(RealtimeShutdown, GraceOverCompletesTheItemWithTheRunningPassesWords) {
  server::ServerConfig config;
  const auto gate = grace_over_in_a_pass(config, kHangGuard.count());  // the gated pass outlasts the grace
  start(config, gated_hooks(gate));
  WsClient client(port_, "/v1/realtime?intent=transcription");
  ASSERT_EQ((*client.read())["type"], "session.created");
  client.send_text(R"({"type":"session.update","session":{"type":"transcription","audio":{"input":{
      "turn_detection":null}}}})");
  ASSERT_EQ((*client.read())["type"], "session.updated");
  append(client, pcm16(20.0, 24000, 4000));
  ASSERT_TRUE(gate->started.wait_for_at_least(11)) << "the model stopped before its eleventh pass";
  std::thread stopper([&] { server_->shutdown(); });
  // The pass returns well after the grace.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    gate->gate.open();
  });
  std::vector<json> messages;
  while (std::optional<json> m = client.read()) messages.push_back(*m);
  stopper.join();
  opener.join();
  EXPECT_TRUE(gate->release());
  EXPECT_GE(gate->returned.value(), 11);
  auto completed = std::find_if(messages.rbegin(), messages.rend(), type_is(kCompleted));
  ASSERT_NE(completed, messages.rend()) << json(messages).dump();
  const std::string transcript = (*completed)["transcript"];
  const std::string committed = trim(gate->committed());
  ASSERT_FALSE(committed.empty());
  EXPECT_EQ(transcript.rfind(committed, 0), 0u) << "transcript: " << transcript << "\ncommitted: " << committed;
  EXPECT_EQ(client.close_code(), 1001);
}

TEST(RealtimeDrain, TheDrainingRefusalIsAnOpenAIError) {
  server::Core core({}, fake_hooks());
  const server::HttpResponse r = core.draining_refusal("/v1/realtime");
  EXPECT_EQ(r.status, 503);
  const json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["type"], "server_error");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("draining"), std::string::npos);
}

}  // namespace
}  // namespace earshot::testing

// Deepgram Flux (/v2/listen) as pure code: options and client messages, and the
// projection of scripted events into TurnInfo messages following Flux's state
// machine (StartOfTurn, Update cadence, EagerEndOfTurn then TurnResumed or an
// EndOfTurn with the same transcript, turn_index after EndOfTurn, sequence ids).
#include "protocol/deepgram/flux.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace earshot::deepgram {
namespace {

using nlohmann::json;

Word word(const std::string& text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.probability = 0.5f;
  return w;
}

std::string error_of(const std::map<std::string, std::string>& query) {
  try {
    parse_flux_options(query);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "accepted";
}

TEST(FluxOptions, ThresholdsCheckedAndPassedToTheTurnStage) {
  FluxOptions o = parse_flux_options({{"model", "flux-general-en"},
                                      {"encoding", "linear16"},
                                      {"sample_rate", "16000"},
                                      {"eot_threshold", "0.8"},
                                      {"eager_eot_threshold", "0.5"},
                                      {"eot_timeout_ms", "3000"},
                                      {"keyterm", "earshot"},
                                      {"mip_opt_out", "false"}});
  EXPECT_EQ(o.listen.encoding, "linear16");
  EXPECT_EQ(o.listen.sample_rate, 16000);
  const std::map<std::string, std::string> params = flux_stage_params(o);
  EXPECT_EQ(params.at("eot_threshold"), "0.8");
  EXPECT_EQ(params.at("eager_eot_threshold"), "0.5");
  EXPECT_EQ(params.at("eot_timeout_ms"), "3000");
  EXPECT_EQ(params.at("turns"), "true");
  EXPECT_EQ(params.at("diarize"), "false");
  EXPECT_EQ(flux_stage_params(parse_flux_options({})).count("eot_threshold"), 0u) << "the server's default";
  EXPECT_NE(error_of({{"eot_threshold", "0.4"}}).find("'eot_threshold'"), std::string::npos);
  EXPECT_NE(error_of({{"eager_eot_threshold", "1"}}).find("'eager_eot_threshold'"), std::string::npos);
  EXPECT_NE(error_of({{"eot_timeout_ms", "100"}}).find("'eot_timeout_ms'"), std::string::npos);
  EXPECT_NE(error_of({{"eot_timeout_ms", "x"}}).find("'eot_timeout_ms'"), std::string::npos);
  EXPECT_NE(error_of({{"eager_eot_threshold", "0.8"}, {"eot_threshold", "0.7"}}).find("above eot_threshold"),
            std::string::npos);
  EXPECT_EQ(error_of({{"eager_eot_threshold", "0.8"}}), "accepted") << "the turn stage checks it against the server's";
  EXPECT_EQ(error_of({{"eager_eot_threshold", "0.8"}, {"eot_threshold", "0.9"}}), "accepted");
  EXPECT_NE(error_of({{"sample_rate", "16000"}, {"encoding", "linear16"}, {"channels", "0"}}), "accepted");
}

TEST(FluxOptions, ClientMessages) {
  EXPECT_EQ(parse_flux_client_message(R"({"type":"CloseStream"})"), FluxClientMessage::kCloseStream);
  EXPECT_EQ(parse_flux_client_message(R"({"type":"KeepAlive"})"), FluxClientMessage::kKeepAlive);
  EXPECT_EQ(parse_flux_client_message(R"({"type":"ForceEndTurn"})"), FluxClientMessage::kForceEndTurn);
  EXPECT_EQ(parse_flux_client_message(R"({"type":"Configure","thresholds":{"eot_threshold":0.8}})"),
            FluxClientMessage::kConfigure);
  EXPECT_THROW(parse_flux_client_message(R"({"type":"Finalize"})"), Error);
  EXPECT_THROW(parse_flux_client_message("not json"), Error);
}

events::TurnEvidence because(const char* reason) {
  events::TurnEvidence e;
  e.reason = reason;
  return e;
}

TEST(FluxProjection, TurnsFollowFluxsStateMachine) {
  StreamInfo info;
  info.request_id = "req";
  FluxProjection p(info);
  const json connected = p.connected();
  EXPECT_EQ(connected["type"], "Connected");
  EXPECT_EQ(connected["request_id"], "req");
  EXPECT_EQ(connected["sequence_id"], 0);

  std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::SpeechStarted{0.5}, events::TurnStarted{0, 0.5},
                                             events::ProvisionalChanged{{word(" I", 0.5, 0.7)}}},
                  0.6);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["type"], "TurnInfo");
  EXPECT_EQ(out[0]["event"], "StartOfTurn");
  EXPECT_EQ(out[0]["turn_index"], 0);
  EXPECT_EQ(out[0]["sequence_id"], 1);
  EXPECT_DOUBLE_EQ(out[0]["audio_window_start"], 0.5);
  EXPECT_DOUBLE_EQ(out[0]["audio_window_end"], 0.6);
  // Updates about every 0.25 s of audio, with the tail.
  EXPECT_TRUE(p.on_events(std::vector<events::Event>{events::ProvisionalChanged{{word(" I", 0.5, 0.7)}}}, 0.8).empty());
  out = p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" I", 0.5, 0.7)}},
                                               events::ProvisionalChanged{{word(" want", 0.7, 0.9)}}},
                    0.85);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "Update");
  EXPECT_EQ(out[0]["transcript"], "I want");
  ASSERT_EQ(out[0]["words"].size(), 2u);
  EXPECT_EQ(out[0]["words"][0]["word"], "I");
  EXPECT_DOUBLE_EQ(out[0]["words"][0]["confidence"], 0.5);
  EXPECT_DOUBLE_EQ(out[0]["words"][1]["start"], 0.7);
  // Eager end (committed words only), resumed, then the end with the eager end's transcript.
  out = p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" want", 0.7, 0.9)}}, events::ProvisionalChanged{{}},
                                 events::SpeechEnded{0.95}, events::TurnEndLikely{0, 0.95, 0.55, because("silence")}},
      1.05);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "EagerEndOfTurn");
  EXPECT_EQ(out[0]["transcript"], "I want");
  EXPECT_DOUBLE_EQ(out[0]["end_of_turn_confidence"], 0.55);
  out = p.on_events(std::vector<events::Event>{events::SpeechStarted{1.2}, events::TurnResumed{0, 1.2}}, 1.25);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "TurnResumed");
  out = p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" tea.", 1.2, 1.5)}}, events::SpeechEnded{1.55},
                                 events::TurnEndLikely{0, 1.55, 0.6, because("silence")}},
      1.65);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "EagerEndOfTurn");
  const std::string eager = out[0]["transcript"];
  out = p.on_events(std::vector<events::Event>{events::TurnEnded{0, 1.55, 0.9, because("silence")}}, 1.9);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "EndOfTurn");
  EXPECT_EQ(out[0]["transcript"], eager);
  EXPECT_EQ(out[0]["transcript"], "I want tea.");
  EXPECT_EQ(out[0]["turn_index"], 0);
  EXPECT_DOUBLE_EQ(out[0]["end_of_turn_confidence"], 0.9);
  EXPECT_EQ(out[0]["trigger"], "model");  // the turn stage decided
  EXPECT_TRUE(p.on_events({}, 3.0).empty()) << "no Update between turns";
  // The next turn counts up and starts empty.
  out = p.on_events(std::vector<events::Event>{events::SpeechStarted{4.0}, events::TurnStarted{1, 4.0}}, 4.1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["turn_index"], 1);
  EXPECT_EQ(out[0]["transcript"], "");
  EXPECT_EQ(out[0]["sequence_id"].get<int>(), 7) << "every message counted from 0 (Connected)";
}

// A turn a ForceEndTurn ended (the session's finalize) says so, as Flux's EndOfTurn does.
TEST(FluxProjection, AForcedEndOfTurnIsTriggeredManually) {
  FluxProjection p(StreamInfo{});
  p.connected();
  p.on_events(std::vector<events::Event>{events::SpeechStarted{0.5}, events::TurnStarted{0, 0.5},
                                         events::WordsCommitted{{word(" one", 0.5, 0.8)}}},
              0.9);
  const std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::TurnEnded{0, 0.9, 1.0, because("finalize")}}, 1.0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["event"], "EndOfTurn");
  EXPECT_EQ(out[0]["trigger"], "manual");
  EXPECT_EQ(out[0]["transcript"], "one");
}

TEST(FluxProjection, ErrorsAndTheEnd) {
  FluxProjection p(StreamInfo{});
  std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::StreamError{"invalid audio: x"}, events::EndOfStream{}}, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["type"], "Error");
  EXPECT_EQ(out[0]["code"], "INVALID_AUDIO");
  EXPECT_EQ(out[0]["description"], "invalid audio: x");
  EXPECT_TRUE(p.ended());
  FluxProjection q(StreamInfo{});
  q.on_events(std::vector<events::Event>{events::EndOfStream{}}, 1);
  EXPECT_TRUE(q.ended());
  const json failure = q.configure_failure("nothing was changed");
  EXPECT_EQ(failure["type"], "ConfigureFailure");
  EXPECT_EQ(failure["description"], "nothing was changed");
}

std::string configure_error(const FluxOptions& current, const std::string& text) {
  try {
    apply_flux_configure(current, text, nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "accepted";
}

TEST(FluxOptions, ConfigureChangesThresholdsOverTheStreamsOwn) {
  const FluxOptions current = parse_flux_options({{"eot_threshold", "0.8"}, {"eot_timeout_ms", "3000"}},
                                                 {{"keyterm", "earshot"}, {"keyterm", "ggml"}});
  ASSERT_EQ(current.listen.keyterms.terms.size(), 2u);
  bool keyterms_changed = true;
  FluxOptions next = apply_flux_configure(
      current, R"({"type":"Configure","thresholds":{"eager_eot_threshold":0.5,"eot_timeout_ms":1200}})",
      &keyterms_changed);
  EXPECT_FALSE(keyterms_changed) << "no keyterms in the message: the stream's stay";
  EXPECT_EQ(next.eot_threshold, 0.8) << "what the message leaves out stays";
  EXPECT_EQ(next.eager_eot_threshold, 0.5);
  EXPECT_EQ(next.eot_timeout_ms, 1200);
  apply_flux_configure(current, R"({"type":"Configure","keyterms":["earshot","ggml"]})", &keyterms_changed);
  EXPECT_FALSE(keyterms_changed) << "the same list";
  apply_flux_configure(current, R"({"type":"Configure","keyterms":["ggml"]})", &keyterms_changed);
  EXPECT_TRUE(keyterms_changed);
  // Checked as the query is, over the stream's thresholds.
  EXPECT_NE(configure_error(current, R"({"thresholds":{"eot_threshold":0.4}})").find("'eot_threshold'"),
            std::string::npos);
  EXPECT_NE(configure_error(current, R"({"thresholds":{"eot_timeout_ms":"5000"}})").find("'eot_timeout_ms'"),
            std::string::npos);
  EXPECT_NE(configure_error(current, R"({"thresholds":{"eager_eot_threshold":0.9}})").find("above eot_threshold"),
            std::string::npos);
  EXPECT_EQ(configure_error(current, R"({"thresholds":{"eager_eot_threshold":0.9,"eot_threshold":0.95}})"), "accepted");
  EXPECT_NE(configure_error(current, R"({"thresholds":[0.5]})").find("'thresholds'"), std::string::npos);
  EXPECT_NE(configure_error(current, R"({"keyterms":"earshot"})").find("'keyterms'"), std::string::npos);
  EXPECT_NE(configure_error(current, "[]"), "accepted");
}

TEST(FluxProjection, ConfigureSuccessSaysWhatTheStreamRunsWith) {
  FluxProjection p(StreamInfo{});
  p.connected();
  Keyterms keyterms;
  keyterms.add("earshot");
  const json ok = p.configure_success(
      {{"eot_threshold", "0.75"}, {"eot_timeout_ms", "1200"}, {"eager_eot_threshold", "0.5"}}, keyterms);
  EXPECT_EQ(ok["type"], "ConfigureSuccess");
  EXPECT_EQ(ok["sequence_id"], 1);
  EXPECT_DOUBLE_EQ(ok["thresholds"]["eot_threshold"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(ok["thresholds"]["eager_eot_threshold"].get<double>(), 0.5);
  EXPECT_EQ(ok["thresholds"]["eot_timeout_ms"], 1200);
  EXPECT_TRUE(ok["thresholds"]["eot_timeout_ms"].is_number_integer());
  EXPECT_EQ(ok["keyterms"], json::array({"earshot"}));
  const json no_eager = p.configure_success({{"eot_threshold", "0.7"}, {"eot_timeout_ms", "5000"}}, Keyterms{});
  EXPECT_FALSE(no_eager["thresholds"].contains("eager_eot_threshold")) << "eager ends off";
  EXPECT_EQ(no_eager["keyterms"], json::array());
}

}  // namespace
}  // namespace earshot::deepgram

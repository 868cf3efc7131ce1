// Deepgram /v1/listen options and message shapes.
#include <gtest/gtest.h>

#include "common/error.h"
#include "protocol/deepgram/messages.h"
#include "protocol/deepgram/options.h"

namespace earshot::deepgram {
namespace {

using nlohmann::json;

std::string error_of(const std::map<std::string, std::string>& query) {
  try {
    parse_listen_options(query);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

Word word(const std::string& text, double start, double end, float p = 0.5f) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.probability = p;
  return w;
}

TEST(DeepgramOptions, DefaultsAndAcceptedValues) {
  ListenOptions d = parse_listen_options({});
  EXPECT_EQ(d.encoding, "");
  EXPECT_EQ(d.channels, 1);
  EXPECT_FALSE(d.interim_results);
  EXPECT_EQ(d.endpointing_ms, 10);
  EXPECT_FALSE(d.utterance_end_ms);
  ListenOptions o = parse_listen_options({{"model", "nova-3"},
                                          {"language", "en-US"},
                                          {"encoding", "linear16"},
                                          {"sample_rate", "48000"},
                                          {"channels", "1"},
                                          {"interim_results", "true"},
                                          {"punctuate", "true"},
                                          {"smart_format", "true"},
                                          {"endpointing", "300"},
                                          {"utterance_end_ms", "1000"},
                                          {"vad_events", "true"},
                                          {"diarize", "false"},
                                          {"keywords", "ignored:2"},
                                          {"token", "secret"}});
  EXPECT_EQ(o.model, "nova-3");
  EXPECT_EQ(o.language, "en");
  EXPECT_EQ(o.encoding, "linear16");
  EXPECT_EQ(o.sample_rate, 48000);
  EXPECT_TRUE(o.interim_results && o.punctuate && o.smart_format && o.vad_events);
  EXPECT_FALSE(o.diarize);
  EXPECT_EQ(o.endpointing_ms, 300);
  EXPECT_EQ(o.utterance_end_ms, 1000);
  EXPECT_EQ(parse_listen_options({{"endpointing", "false"}}).endpointing_ms, std::nullopt);
  EXPECT_EQ(parse_listen_options({{"language", "multi"}}).language, "auto");
  EXPECT_EQ(parse_listen_options({{"language", "fr"}}).language, "fr");
}

TEST(DeepgramOptions, EachBadValueNamesItsOption) {
  EXPECT_EQ(error_of({{"channels", "2"}}),
            "invalid option 'channels': 2 channels are not supported: earshot transcribes mono audio (send "
            "channels=1)");
  EXPECT_EQ(error_of({{"encoding", "mulaw"}, {"sample_rate", "8000"}}).rfind("invalid option 'encoding': 'mulaw'", 0),
            0u);
  EXPECT_EQ(error_of({{"encoding", "linear16"}}), "invalid option 'sample_rate': required with encoding=linear16");
  EXPECT_EQ(error_of({{"sample_rate", "fast"}}), "invalid option 'sample_rate': expected a whole number, got 'fast'");
  EXPECT_EQ(error_of({{"sample_rate", "100"}}), "invalid option 'sample_rate': 100 is out of range (8000-192000)");
  EXPECT_EQ(error_of({{"interim_results", "maybe"}}),
            "invalid option 'interim_results': expected true or false, got 'maybe'");
  EXPECT_EQ(error_of({{"punctuate", "yes"}}), "invalid option 'punctuate': expected true or false, got 'yes'");
  EXPECT_EQ(error_of({{"vad_events", "x"}}), "invalid option 'vad_events': expected true or false, got 'x'");
  EXPECT_EQ(error_of({{"diarize", ""}}), "invalid option 'diarize': expected true or false, got ''");
  EXPECT_EQ(error_of({{"smart_format", "2"}}), "invalid option 'smart_format': expected true or false, got '2'");
  EXPECT_EQ(error_of({{"endpointing", "-5"}}), "invalid option 'endpointing': -5 is out of range (0-60000)");
  EXPECT_EQ(error_of({{"interim_results", "true"}, {"utterance_end_ms", "500"}}),
            "invalid option 'utterance_end_ms': 500 is out of range (1000-5000)");
  EXPECT_EQ(error_of({{"interim_results", "true"}, {"utterance_end_ms", "6000"}}),
            "invalid option 'utterance_end_ms': 6000 is out of range (1000-5000)");
  EXPECT_EQ(error_of({{"utterance_end_ms", "1000"}}), "invalid option 'utterance_end_ms': needs interim_results=true");
  EXPECT_EQ(error_of({{"language", "e1"}}),
            "invalid option 'language': expected a language code such as en or en-US, got 'e1'");
  EXPECT_EQ(error_of({{"model", ""}}), "invalid option 'model': empty");
}

TEST(DeepgramMessages, ResultsCarryTheSdkFields) {
  StreamInfo info;
  info.request_id = "req-1";
  info.model_uuid = "uuid-1";
  ListenOptions o;
  o.punctuate = true;
  Results r;
  r.words = {word(" Hello,", 0.5, 0.9, 0.8f), word(" World", 1.0, 1.4, 0.6f), word(".", 1.4, 1.45, 0.9f)};
  r.words[0].language = "en";
  r.start = 0.25;
  r.duration = 1.2;
  r.is_final = true;
  json m = results_message(r, o, info);
  EXPECT_EQ(m["type"], "Results");
  EXPECT_EQ(m["channel_index"], json::array({0, 1}));
  EXPECT_DOUBLE_EQ(m["start"], 0.25);
  EXPECT_DOUBLE_EQ(m["duration"], 1.2);
  EXPECT_EQ(m["is_final"], true);
  EXPECT_EQ(m["speech_final"], false);
  EXPECT_EQ(m["from_finalize"], false);
  EXPECT_EQ(m["metadata"]["request_id"], "req-1");
  EXPECT_EQ(m["metadata"]["model_uuid"], "uuid-1");
  const json& alt = m["channel"]["alternatives"][0];
  EXPECT_EQ(alt["transcript"], "Hello, World.");
  ASSERT_EQ(alt["words"].size(), 2u);  // the lone "." joins "World"
  json first = alt["words"][0];
  EXPECT_NEAR(first["confidence"].get<double>(), 0.8, 1e-6);
  first.erase("confidence");
  EXPECT_EQ(first,
            json({{"word", "hello"}, {"start", 0.5}, {"end", 0.9}, {"punctuated_word", "Hello,"}, {"language", "en"}}));
  EXPECT_EQ(alt["words"][1]["punctuated_word"], "World.");
  EXPECT_DOUBLE_EQ(alt["words"][1]["end"], 1.45);
  EXPECT_FALSE(alt["words"][1].contains("speaker"));
  EXPECT_NEAR(alt["confidence"].get<double>(), (0.8 + 0.6 + 0.9) / 3, 1e-6);

  o.punctuate = false;
  EXPECT_EQ(results_message(r, o, info)["channel"]["alternatives"][0]["transcript"], "hello world");
  o.diarize = true;
  r.words[0].speaker = 0;
  EXPECT_EQ(words_json(r.words, o)[0]["speaker"], 0);
  EXPECT_FALSE(words_json(r.words, o)[1].contains("speaker"));  // no speaker known for it
}

TEST(DeepgramMessages, OtherServerMessages) {
  StreamInfo info;
  info.request_id = "r";
  info.model_uuid = "u";
  info.created = "2026-01-01T00:00:00.000Z";
  json meta = metadata_message(info, 11.0004, "abc");
  EXPECT_EQ(meta["type"], "Metadata");
  EXPECT_EQ(meta["request_id"], "r");
  EXPECT_EQ(meta["sha256"], "abc");
  EXPECT_EQ(meta["created"], "2026-01-01T00:00:00.000Z");
  EXPECT_DOUBLE_EQ(meta["duration"], 11.0);
  EXPECT_EQ(meta["channels"], 1);
  EXPECT_EQ(meta["model_info"]["u"]["name"], "earshot");
  EXPECT_EQ(speech_started_message(1.2345), json({{"type", "SpeechStarted"}, {"channel", {0}}, {"timestamp", 1.235}}));
  EXPECT_EQ(utterance_end_message(2.5), json({{"type", "UtteranceEnd"}, {"channel", {0, 1}}, {"last_word_end", 2.5}}));
  EXPECT_EQ(error_message("bad")["type"], "Error");
  EXPECT_EQ(error_message("bad")["description"], "bad");

  json pre = prerecorded_response({word(" Hi", 0, 0.5)}, 3, "en", ListenOptions{}, info, "abc");
  EXPECT_EQ(pre["metadata"]["request_id"], "r");
  EXPECT_DOUBLE_EQ(pre["metadata"]["duration"], 3);
  EXPECT_EQ(pre["results"]["channels"][0]["alternatives"][0]["transcript"], "hi");
  EXPECT_EQ(pre["results"]["channels"][0]["alternatives"][0]["words"].size(), 1u);
  EXPECT_EQ(pre["results"]["channels"][0]["detected_language"], "en");
}

// The defect libFuzzer found in the WhisperLiveKit refusal (fuzz/targets/wlk_request.cpp)
// existed here too: an option value that is not UTF-8 ("encoding=%FF") is quoted in the
// Error message (live) and the REST error (prerecorded), whose dump() threw.
TEST(DeepgramMessages, ErrorsQuotingBytesThatAreNotUtf8AreValidJson) {
  std::string message;
  try {
    parse_listen_options({{"encoding", "\xFF"}});
    FAIL();
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_EQ(message.rfind("invalid option 'encoding': '\xFF' is not supported", 0), 0u) << message;
  const json live = json::parse(error_message(message).dump());
  EXPECT_EQ(live["description"].get<std::string>().rfind("invalid option 'encoding': '\xEF\xBF\xBD' is", 0), 0u);
  EXPECT_EQ(live["message"], live["description"]);
  const json rest = json::parse(rest_error("Bad Request", message, "r").dump());
  EXPECT_EQ(rest["err_msg"], live["description"]);
}

TEST(DeepgramMessages, ClientMessages) {
  EXPECT_EQ(parse_client_message(R"({"type":"KeepAlive"})"), ClientMessage::kKeepAlive);
  EXPECT_EQ(parse_client_message(R"({"type":"Finalize"})"), ClientMessage::kFinalize);
  EXPECT_EQ(parse_client_message(R"({"type":"CloseStream"})"), ClientMessage::kCloseStream);
  EXPECT_THROW(parse_client_message("KeepAlive"), Error);
  EXPECT_THROW(parse_client_message(R"({"kind":"KeepAlive"})"), Error);
  try {
    parse_client_message(R"({"type":"Configure"})");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown message type 'Configure': expected KeepAlive, Finalize or CloseStream");
  }
}

}  // namespace
}  // namespace earshot::deepgram

// Deepgram /v1/listen options and message shapes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/error.h"
#include "protocol/deepgram/flux.h"
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
  EXPECT_EQ(parse_listen_options({}).delay_ms, 0);  // earshot's own: the server's delay
  EXPECT_EQ(parse_listen_options({{"delay_ms", "960"}}).delay_ms, 960);
  EXPECT_NE(error_of({{"delay_ms", "0"}}).find("'delay_ms'"), std::string::npos) << error_of({{"delay_ms", "0"}});
  EXPECT_NE(error_of({{"delay_ms", "0.5"}}).find("'delay_ms'"), std::string::npos);
  EXPECT_EQ(parse_flux_options({{"delay_ms", "2400"}}, {}).listen.delay_ms, 2400);  // Flux reads it alike
  EXPECT_EQ(o.keyterms.terms.size(), 1u);  // keywords=ignored:2 is a term of weight 2
  EXPECT_EQ(o.keyterms.terms[0].weight, 2);
}

TEST(DeepgramOptions, TelephonyEncodingsChannelsAndKeyterms) {
  const ListenOptions o = parse_listen_options(
      {{"encoding", "MULAW"}, {"sample_rate", "8000"}, {"channels", "2"}, {"multichannel", "true"}});
  EXPECT_EQ(o.encoding, "mulaw");
  EXPECT_EQ(o.sample_rate, 8000);
  EXPECT_EQ(o.channels, 2);
  EXPECT_TRUE(o.multichannel);
  EXPECT_FALSE(parse_listen_options({{"encoding", "alaw"}, {"sample_rate", "8000"}, {"channels", "2"}}).multichannel);
  // keyterm and keywords repeat: every value counts, in order (the map alone keeps the last).
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"keyterm", "earshot"}, {"keywords", "Parakeet:3"}, {"keyterm", "Nemotron streaming"}, {"keywords", "um:-5"}};
  std::map<std::string, std::string> last;
  for (const auto& [k, v] : pairs) last[k] = v;
  const Keyterms k = parse_listen_options(last, pairs).keyterms;
  ASSERT_EQ(k.terms.size(), 4u);
  EXPECT_EQ(k.terms[0].text, "earshot");
  EXPECT_EQ(k.terms[1].text, "Nemotron streaming");
  EXPECT_EQ(k.terms[2].text, "Parakeet");
  EXPECT_EQ(k.terms[2].weight, 3);
  EXPECT_EQ(k.terms[3].weight, -5);
  EXPECT_EQ(parse_listen_options(last).keyterms.terms.size(), 2u);
}

TEST(DeepgramOptions, EachBadValueNamesItsOption) {
  EXPECT_EQ(error_of({{"channels", "2"}}),
            "invalid option 'channels': applies to raw audio (encoding=linear16, mulaw or alaw); a container says "
            "its own channels, mixed down to one transcript");
  EXPECT_EQ(error_of({{"channels", "65"}, {"encoding", "mulaw"}, {"sample_rate", "8000"}}),
            "invalid option 'channels': 65 is out of range (1-64)");
  EXPECT_EQ(error_of({{"multichannel", "true"}, {"encoding", "mulaw"}, {"sample_rate", "8000"}}),
            "invalid option 'multichannel': needs raw audio of 2 or more interleaved channels (encoding and "
            "channels=N)");
  EXPECT_EQ(error_of({{"encoding", "opus"}, {"sample_rate", "8000"}}).rfind("invalid option 'encoding': 'opus'", 0),
            0u);
  EXPECT_EQ(error_of({{"encoding", "linear16"}}), "invalid option 'sample_rate': required with encoding=linear16");
  EXPECT_EQ(error_of({{"encoding", "alaw"}}), "invalid option 'sample_rate': required with encoding=alaw");
  EXPECT_EQ(error_of({{"keyterm", std::string(300, 'k')}}),
            "invalid option 'keyterm': a term of 300 bytes, at most 200");
  EXPECT_EQ(error_of({{"keywords", ":4"}}),
            "invalid option 'keywords': expected word or word:intensifier (a number), got ':4'");
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
  EXPECT_FALSE(meta.contains("skipped_seconds"));
  EXPECT_DOUBLE_EQ(metadata_message(info, 11.0, "abc", 2.5)["skipped_seconds"], 2.5);
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

TEST(DeepgramMessages, MultichannelMessagesNameTheirChannel) {
  StreamInfo info;
  info.channels = 2;
  Results r;
  r.channel = 1;
  r.words = {word(" Hi", 0, 0.5)};
  EXPECT_EQ(results_message(r, {}, info)["channel_index"], json::array({1, 2}));
  EXPECT_EQ(speech_started_message(1.0, 1)["channel"], json::array({1}));
  EXPECT_EQ(utterance_end_message(2.0, 1, 2)["channel"], json::array({1, 2}));
  EXPECT_EQ(metadata_message(info, 3, "abc")["channels"], 2);
  const json pre = prerecorded_response(
      std::vector<ChannelTranscript>{{{word(" left", 0, 0.5)}, "en"}, {{word(" right", 0.2, 0.6)}, ""}}, 3, {}, info,
      "abc");
  ASSERT_EQ(pre["results"]["channels"].size(), 2u);
  EXPECT_EQ(pre["results"]["channels"][0]["alternatives"][0]["transcript"], "left");
  EXPECT_EQ(pre["results"]["channels"][0]["detected_language"], "en");
  EXPECT_EQ(pre["results"]["channels"][1]["alternatives"][0]["transcript"], "right");
  EXPECT_FALSE(pre["results"]["channels"][1].contains("detected_language"));
  EXPECT_EQ(pre["metadata"]["channels"], 2);
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
  // The value is quoted with its bad byte written out (common/utf8.h quote_client_text) ...
  ASSERT_EQ(message.rfind("invalid option 'encoding': '\\xFF' is not supported", 0), 0u) << message;
  const json live = json::parse(error_message(message).dump());
  EXPECT_EQ(live["description"], message);
  EXPECT_EQ(live["message"], live["description"]);
  const json rest = json::parse(rest_error("Bad Request", message, "r").dump());
  EXPECT_EQ(rest["err_msg"], live["description"]);
  // ... and a message that still holds bad bytes is repaired when it becomes JSON.
  EXPECT_EQ(json::parse(error_message("x\xFF").dump())["description"], "x\xEF\xBF\xBD");
  EXPECT_EQ(json::parse(rest_error("Bad Request", "x\xFF", "r").dump())["err_msg"], "x\xEF\xBF\xBD");
}

// A NUL in a query value ended the error there (what() is a C string); control
// characters are written out, and a long value is quoted by a short prefix.
TEST(DeepgramMessages, OptionErrorsShowNulsAndControlCharactersEscaped) {
  const auto error_of = [](const std::map<std::string, std::string>& query) {
    try {
      parse_listen_options(query);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of({{"punctuate", std::string("tr\0ue", 5)}}),
            "invalid option 'punctuate': expected true or false, got 'tr\\x00ue'");
  EXPECT_EQ(error_of({{"language", "en\r\nX-Injected: 1"}}),
            "invalid option 'language': expected a language code such as en or en-US, got "
            "'en\\x0D\\x0AX-Injected: 1'");
  EXPECT_EQ(
      error_of({{"sample_rate", std::string(5000, '9')}}),
      "invalid option 'sample_rate': expected a whole number, got '" + std::string(64, '9') + "...' (5000 bytes)");
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

// A 1 MB "type" was echoed whole, and twice (the message's description and
// message fields): now a 64-byte prefix and the length, in a message of ~200 bytes.
TEST(DeepgramMessages, AnUnknownTypeIsQuotedByAShortPrefix) {
  const std::string type(1 << 20, 'K');
  try {
    parse_client_message(json{{"type", type}}.dump());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, "unknown message type '" + std::string(64, 'K') +
                        "...' (1048576 bytes): expected KeepAlive, Finalize or CloseStream");
    EXPECT_LT(error_message(what).dump().size(), 500u);
  }
  try {
    parse_client_message(json{{"type", std::string("Keep\0Alive", 10)}}.dump());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown message type 'Keep\\x00Alive': expected KeepAlive, Finalize or CloseStream");
  }
}

}  // namespace
}  // namespace earshot::deepgram

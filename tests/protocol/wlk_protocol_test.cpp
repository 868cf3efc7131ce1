// Message shapes of WhisperLiveKit's protocol and request targets, without a network.
#include <gtest/gtest.h>

#include "common/error.h"
#include "protocol/target.h"
#include "protocol/wlk/protocol.h"

namespace earshot::protocol::wlk {
namespace {

using nlohmann::json;
using protocol::parse_target;
using protocol::Target;
using protocol::url_decode;

Snapshot snapshot(std::vector<Line> lines, std::string buffer = "") {
  Snapshot s;
  s.lines = std::move(lines);
  s.buffer_transcription = std::move(buffer);
  return s;
}

TEST(ProtocolTime, FormatsHoursMinutesSecondsCentiseconds) {
  EXPECT_EQ(format_protocol_time(0), "0:00:00.00");
  EXPECT_EQ(format_protocol_time(0.52), "0:00:00.52");
  EXPECT_EQ(format_protocol_time(63.104), "0:01:03.10");
  EXPECT_EQ(format_protocol_time(3600 + 59.999), "1:01:00.00");
  EXPECT_EQ(format_protocol_time(-1), "0:00:00.00");
}

TEST(Target, ParsesPathAndDecodesQuery) {
  Target t = parse_target("/asr?language=en&mode=diff&token=a%2Bb+c&flag");
  EXPECT_EQ(t.path, "/asr");
  EXPECT_EQ(t.query.at("language"), "en");
  EXPECT_EQ(t.query.at("mode"), "diff");
  EXPECT_EQ(t.query.at("token"), "a+b c");
  EXPECT_EQ(t.query.at("flag"), "");
  EXPECT_EQ(parse_target("/health").query.size(), 0u);
  EXPECT_EQ(url_decode("%zz%4"), "%zz%4");
}

TEST(StreamParams, DefaultsAndErrors) {
  StreamParams p = parse_stream_params({}, "auto");
  EXPECT_EQ(p.language, "auto");
  EXPECT_FALSE(p.diff_mode);
  EXPECT_EQ(parse_stream_params({{"language", ""}}, "de").language, "de");
  EXPECT_TRUE(parse_stream_params({{"mode", "diff"}}, "").diff_mode);
  EXPECT_EQ(p.delay_ms, 0);
  EXPECT_EQ(parse_stream_params({{"delay_ms", "480"}}, "").delay_ms, 480);
  for (const char* bad : {"", "0", "-80", "80ms", "1e3", "99999999999"}) {
    try {
      parse_stream_params({{"delay_ms", bad}}, "");
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()),
                std::string("invalid delay_ms '") + bad + "': expected milliseconds, a whole number from 1 to 60000");
    }
  }
  try {
    parse_stream_params({{"mode", "x"}}, "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "invalid mode 'x': expected 'full' or 'diff'");
  }
}

// Found by libFuzzer (fuzz/targets/wlk_request.cpp, input in fuzz_regressions/): a query
// value that is not UTF-8 ("mode=x%82") was quoted in the refusal, whose dump() threw
// nlohmann's type_error out of the connection's handler, ending the server's process.
TEST(Messages, RefusalQuotingBytesThatAreNotUtf8IsValidJson) {
  std::string message;
  try {
    parse_stream_params(parse_target("/asr?mode=x%82").query, "");
    FAIL();
  } catch (const Error& e) {
    message = e.what();
  }
  // The value is quoted with its bad byte written out (common/utf8.h quote_client_text) ...
  const std::string text = error_message(message).dump();
  EXPECT_EQ(json::parse(text)["error"], "invalid mode 'x\\x82': expected 'full' or 'diff'");
  // ... and a message that still holds bad bytes is repaired when it becomes JSON.
  EXPECT_EQ(json::parse(error_message("x\x82").dump())["error"], "x\xEF\xBF\xBD");
  EXPECT_EQ(error_message("caf\xC3\xA9")["error"], "caf\xC3\xA9");  // valid UTF-8 stays as it is
}

// A NUL in a query value ended the refusal there: what() is a C string, and the
// adapters build their messages from it. Control characters are written out instead.
TEST(Messages, RefusalQuotingANulOrControlCharactersKeepsTheWholeMessage) {
  try {
    parse_stream_params(parse_target("/asr?mode=a%00b%0A%1B[2J").query, "");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();  // as the adapters read it
    EXPECT_EQ(what, "invalid mode 'a\\x00b\\x0A\\x1B[2J': expected 'full' or 'diff'");
    EXPECT_EQ(json::parse(error_message(what).dump())["error"], what);
  }
  try {
    parse_stream_params({{"mode", std::string(100000, 'd')}}, "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "invalid mode '" + std::string(64, 'd') + "...' (100000 bytes): expected 'full' or 'diff'");
  }
}

TEST(Messages, ConfigErrorReady) {
  EXPECT_EQ(config_message(false, false).dump(), R"({"mode":"full","type":"config","useAudioWorklet":false})");
  EXPECT_EQ(config_message(true, true), json::parse(R"({"type":"config","useAudioWorklet":true,"mode":"diff"})"));
  EXPECT_EQ(error_message("bad"), json::parse(R"({"type":"error","error":"bad"})"));
  EXPECT_EQ(ready_to_stop_message(), json::parse(R"({"type":"ready_to_stop"})"));
}

TEST(FullUpdate, ShapeStatusAndOptionalKeys) {
  Snapshot s = snapshot({{1, " Hello", 0.52, 3.1, "en", ""},
                         {-2, "", 3.1, 9.4, "", ""},
                         {1, " I am fine.", 9.4, 11.02, "", "Je vais bien."},
                         {1, "", 12, 13, "", ""}},
                        " and you");
  s.received_seconds = 12.0;
  s.processed_seconds = 11.5;
  s.committed_until = 11.02;
  s.transcribed_until = 11.4;
  s.wall_seconds_since_first_audio = 12.04;
  EXPECT_EQ(full_update(s), json::parse(R"({"status":"active_transcription",
    "lines":[{"speaker":1,"text":" Hello","start":"0:00:00.52","end":"0:00:03.10","detected_language":"en"},
             {"speaker":-2,"text":"","start":"0:00:03.10","end":"0:00:09.40"},
             {"speaker":1,"text":" I am fine.","start":"0:00:09.40","end":"0:00:11.02","translation":"Je vais bien."}],
    "buffer_transcription":" and you","buffer_diarization":"","buffer_translation":"",
    "remaining_time_transcription":0.6,"remaining_time_transcription_processing":0.5,
    "remaining_time_transcription_policy":0.5,"remaining_time_diarization":0.0})"));
  EXPECT_EQ(full_update(snapshot({}))["status"], "no_audio_detected");
  EXPECT_EQ(full_update(snapshot({}, " hm"))["status"], "active_transcription");
  Snapshot failed = snapshot({});
  failed.error = "invalid audio: x";
  EXPECT_EQ(full_update(failed)["status"], "error");
  EXPECT_EQ(full_update(failed)["error"], "invalid audio: x");
}

TEST(UpdateEncoder, FullModeSkipsUnchangedUnlessForced) {
  UpdateEncoder e(false);
  Snapshot s = snapshot({{1, " a", 0, 1, "", ""}});
  ASSERT_TRUE(e.next(s));
  EXPECT_FALSE(e.next(s));
  EXPECT_TRUE(e.next(s, true));
  s.buffer_transcription = " b";
  EXPECT_EQ(e.next(s).value()["buffer_transcription"], " b");
}

// The lag figures follow the wall clock: a change of them alone goes out at most once
// per lag_refresh_seconds of the caller's clock; any other change goes out at once.
TEST(UpdateEncoder, LagFiguresAloneAreRefreshedAtMostOncePerSecond) {
  for (bool diff : {false, true}) {
    SCOPED_TRACE(diff ? "diff" : "full");
    UpdateEncoder e(diff, 300.0, 1.0);
    Snapshot s = snapshot({{1, " a", 0, 1, "", ""}});
    s.wall_seconds_since_first_audio = 2.0;
    ASSERT_TRUE(e.next(s, false, 10.0));
    s.wall_seconds_since_first_audio = 2.5;  // lag 2.0 -> 2.5
    EXPECT_FALSE(e.next(s, false, 10.5));
    s.buffer_transcription = " b";  // a real change: at once, with the current lag
    auto changed = e.next(s, false, 10.6);
    ASSERT_TRUE(changed);
    EXPECT_DOUBLE_EQ((*changed)["remaining_time_transcription"].get<double>(), 2.5);
    s.wall_seconds_since_first_audio = 3.0;
    EXPECT_FALSE(e.next(s, false, 11.5));
    auto refreshed = e.next(s, false, 11.7);
    ASSERT_TRUE(refreshed);
    EXPECT_DOUBLE_EQ((*refreshed)["remaining_time_transcription"].get<double>(), 3.0);
    EXPECT_FALSE(e.next(s, false, 20.0)) << "nothing changed at all";
    s.wall_seconds_since_first_audio = 4.0;
    EXPECT_TRUE(e.next(s)) << "without a clock, every change goes out";
  }
}

TEST(UpdateEncoder, SkippedAudioIsASilenceLineMarkedSkippedAndCounted) {
  Line skipped{-2, "", 0, 12.5, "", ""};
  skipped.skipped = true;
  Snapshot s = snapshot({skipped, {1, " a", 12.5, 13, "", ""}});
  s.skipped_seconds = 12.5;
  json update = full_update(s);
  EXPECT_EQ(update["lines"][0], json::parse(R"({"speaker":-2,"text":"","start":"0:00:00.00","end":"0:00:12.50",
    "skipped":true})"));
  EXPECT_FALSE(update["lines"][1].contains("skipped"));
  EXPECT_DOUBLE_EQ(update["skipped_seconds"].get<double>(), 12.5);
  EXPECT_FALSE(full_update(snapshot({}))["lines"].is_null());
  EXPECT_FALSE(full_update(snapshot({})).contains("skipped_seconds")) << "only when something was skipped";
}

TEST(UpdateEncoder, DiffModeSnapshotThenDiffs) {
  UpdateEncoder e(true);
  Line a{1, " a", 0, 1, "", ""}, b{1, " b", 1, 2, "", ""};
  json first = e.next(snapshot({a})).value();
  EXPECT_EQ(first["type"], "snapshot");
  EXPECT_EQ(first["seq"], 1);
  EXPECT_EQ(first["lines"].size(), 1u);
  EXPECT_FALSE(e.next(snapshot({a})));
  // A new line: only it is sent.
  json d = e.next(snapshot({a, b})).value();
  EXPECT_EQ(d, json::parse(R"({"type":"diff","seq":2,"status":"active_transcription","n_lines":2,
    "new_lines":[{"speaker":1,"text":" b","start":"0:00:01.00","end":"0:00:02.00"}],
    "buffer_transcription":"","buffer_diarization":"","buffer_translation":"",
    "remaining_time_transcription":0.0,"remaining_time_transcription_processing":0.0,
    "remaining_time_transcription_policy":0.0,"remaining_time_diarization":0.0})"));
  // The last line grows: it is re-sent; the first is kept.
  b.text = " b c";
  d = e.next(snapshot({a, b})).value();
  EXPECT_EQ(d["n_lines"], 2);
  EXPECT_EQ(d["new_lines"].size(), 1u);
  EXPECT_EQ(d["new_lines"][0]["text"], " b c");
  // Only the buffer changes: no new_lines key.
  d = e.next(snapshot({a, b}, " d")).value();
  EXPECT_FALSE(d.contains("new_lines"));
  EXPECT_FALSE(d.contains("lines_pruned"));
  EXPECT_EQ(d["buffer_transcription"], " d");
  EXPECT_EQ(d["seq"], 4);
}

TEST(UpdateEncoder, DiffModePrunesLinesOlderThanRetention) {
  UpdateEncoder e(true, 300.0);
  std::vector<Line> lines = {{1, " old", 0, 10, "", ""}, {1, " mid", 100, 200, "", ""}};
  e.next(snapshot(lines));
  lines.push_back({1, " new", 305, 320, "", ""});  // line " old" ended 310 s before the newest end
  json d = e.next(snapshot(lines)).value();
  EXPECT_EQ(d["lines_pruned"], 1);
  EXPECT_EQ(d["n_lines"], 2);
  EXPECT_EQ(d["new_lines"].size(), 1u);
  EXPECT_EQ(d["new_lines"][0]["text"], " new");
}

}  // namespace
}  // namespace earshot::protocol::wlk

// The Deepgram projection over synthetic session event streams: finals exactly
// once and tiling the audio, interims replaced, speech_final on the audio clock,
// UtteranceEnd from the word gap, Finalize, errors and the end of the stream.
#include <gtest/gtest.h>

#include <random>

#include "protocol/deepgram/projection.h"

namespace earshot::deepgram {
namespace {

using nlohmann::json;

Word word(const std::string& text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.probability = 0.9f;
  return w;
}

ListenOptions options(bool interim = true, std::optional<int> endpointing = 10, std::optional<int> utterance_end = {}) {
  ListenOptions o;
  o.interim_results = interim;
  o.endpointing_ms = endpointing;
  o.utterance_end_ms = utterance_end;
  return o;
}

std::vector<json> of_type(const std::vector<json>& messages, const std::string& type) {
  std::vector<json> out;
  for (const json& m : messages)
    if (m["type"] == type) out.push_back(m);
  return out;
}

std::vector<std::string> words_of(const json& results) {
  std::vector<std::string> out;
  for (const json& w : results["channel"]["alternatives"][0]["words"]) out.push_back(w["word"]);
  return out;
}

TEST(DeepgramProjection, FinalsAreEveryCommittedWordOnceInTilingWindows) {
  std::mt19937 rng(3);
  Projection p(options(true, std::nullopt), StreamInfo{});
  std::vector<std::string> committed, finals;
  std::vector<json> all;
  double t = 0;
  int n = 0;
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<events::Event> events;
    for (int i = 0, k = static_cast<int>(rng() % 4); i < k; ++i) {
      std::vector<Word> ws;
      for (int j = 0, m = 1 + static_cast<int>(rng() % 3); j < m; ++j, t += 0.3) {
        ws.push_back(word(" w" + std::to_string(n++), t, t + 0.25));
        committed.push_back(ws.back().text.substr(1));
      }
      events.push_back(events::WordsCommitted{ws});
      events.push_back(events::ProvisionalChanged{{word(" tail" + std::to_string(n), t, t + 0.2)}});
    }
    for (json& m : p.on_events(events, t)) all.push_back(std::move(m));
  }
  for (json& m : p.on_events(std::vector<events::Event>{events::EndOfStream{}}, t)) all.push_back(std::move(m));
  double until = 0;
  for (const json& m : of_type(all, "Results")) {
    if (!m["is_final"]) {
      EXPECT_NEAR(m["start"].get<double>(), until, 1e-9) << "an interim starts where the finals end";
      continue;
    }
    EXPECT_NEAR(m["start"].get<double>(), until, 1e-9) << "finals tile the audio";
    until = m["start"].get<double>() + m["duration"].get<double>();
    for (const std::string& w : words_of(m)) finals.push_back(w);
    for (const json& w : m["channel"]["alternatives"][0]["words"]) {
      EXPECT_GE(w["start"].get<double>(), m["start"].get<double>() - 1e-9);
      EXPECT_LE(w["end"].get<double>(), until + 1e-9);
    }
  }
  EXPECT_EQ(finals, committed);
  EXPECT_TRUE(p.ended());
}

TEST(DeepgramProjection, InterimsAreReplacedAndNotRepeated) {
  Projection p(options(), StreamInfo{});
  auto a = p.on_events(std::vector<events::Event>{events::ProvisionalChanged{{word(" hel", 0, 0.3)}}}, 0.4);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["is_final"], false);
  EXPECT_EQ(words_of(a[0]), std::vector<std::string>{"hel"});
  // The same tail again: nothing new to say.
  EXPECT_TRUE(p.on_events(std::vector<events::Event>{events::ProvisionalChanged{{word(" hel", 0, 0.3)}}}, 0.5).empty());
  auto b = p.on_events(
      std::vector<events::Event>{events::ProvisionalChanged{{word(" hello", 0, 0.4), word(" wor", 0.5, 0.7)}}}, 0.8);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(words_of(b[0]), (std::vector<std::string>{"hello", "wor"}));
  auto c = p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" hello", 0, 0.4)}},
                                                  events::ProvisionalChanged{{word(" world", 0.5, 0.8)}}},
                       0.9);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["is_final"], true);
  EXPECT_EQ(words_of(c[0]), std::vector<std::string>{"hello"});
  EXPECT_EQ(c[1]["is_final"], false);
  EXPECT_DOUBLE_EQ(c[1]["start"], 0.4);
  EXPECT_EQ(words_of(c[1]), std::vector<std::string>{"world"});

  Projection quiet(options(false), StreamInfo{});
  EXPECT_TRUE(
      quiet.on_events(std::vector<events::Event>{events::ProvisionalChanged{{word(" hel", 0, 0.3)}}}, 0.4).empty());
}

TEST(DeepgramProjection, SpeechFinalWaitsForEndpointingOnTheAudioClock) {
  Projection p(options(true, 300), StreamInfo{});
  std::vector<events::Event> end = {events::WordsCommitted{{word(" yes", 1.0, 1.5)}}, events::SpeechEnded{1.6}};
  std::vector<json> held = of_type(p.on_events(end, 1.8), "Results");
  ASSERT_EQ(held.size(), 1u) << "held until 300 ms of silence were processed, shown as an interim";
  EXPECT_EQ(held[0]["is_final"], false);
  EXPECT_EQ(words_of(held[0]), std::vector<std::string>{"yes"});
  auto later = p.on_events({}, 1.95);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0]["is_final"], true);
  EXPECT_EQ(later[0]["speech_final"], true);
  EXPECT_EQ(words_of(later[0]), std::vector<std::string>{"yes"});
  EXPECT_DOUBLE_EQ(later[0]["start"].get<double>() + later[0]["duration"].get<double>(), 1.6);

  // Speech resumes before the endpoint is confirmed: a plain final, no speech_final.
  Projection q(options(true, 300), StreamInfo{});
  ASSERT_EQ(q.on_events(end, 1.7).size(), 1u);  // the interim
  auto resumed = q.on_events(std::vector<events::Event>{events::SpeechStarted{1.8}}, 1.85);
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0]["is_final"], true);
  EXPECT_EQ(resumed[0]["speech_final"], false);

  // endpointing=false: finals go out at once and are never speech_final.
  Projection off(options(true, std::nullopt), StreamInfo{});
  auto now = off.on_events(end, 1.6);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0]["speech_final"], false);
  EXPECT_TRUE(off.on_events({}, 5.0).empty());
}

TEST(DeepgramProjection, UtteranceEndAfterAWordGapAnchoredOnTheLastFinalWord) {
  Projection p(options(true, std::nullopt, 1000), StreamInfo{});
  p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" one", 0.5, 1.5)}}}, 1.6);
  EXPECT_TRUE(of_type(p.on_events({}, 2.4), "UtteranceEnd").empty());
  // A word heard within the gap (interim) keeps the utterance open.
  auto close = p.on_events(std::vector<events::Event>{events::ProvisionalChanged{{word(" two", 2.3, 2.6)}}}, 2.7);
  EXPECT_TRUE(of_type(close, "UtteranceEnd").empty());
  p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" two", 2.3, 2.6)}}, events::ProvisionalChanged{{}}},
      2.8);
  EXPECT_TRUE(of_type(p.on_events({}, 3.5), "UtteranceEnd").empty());
  auto gap = p.on_events({}, 3.65);
  ASSERT_EQ(of_type(gap, "UtteranceEnd").size(), 1u);
  EXPECT_DOUBLE_EQ(of_type(gap, "UtteranceEnd")[0]["last_word_end"], 2.6);
  EXPECT_TRUE(p.on_events({}, 9.0).empty()) << "once per finalized word";

  Projection none(options(true, std::nullopt), StreamInfo{});
  none.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" one", 0.5, 1.5)}}}, 1.6);
  EXPECT_TRUE(none.on_events({}, 9.0).empty()) << "no utterance_end_ms, no UtteranceEnd";
}

TEST(DeepgramProjection, VadEventsOnlyWhenAsked) {
  Projection without(options(), StreamInfo{});
  auto m = without.on_events(std::vector<events::Event>{events::SpeechStarted{0.42}}, 0.5);
  EXPECT_TRUE(m.empty());
  ListenOptions o = options();
  o.vad_events = true;
  Projection vad(o, StreamInfo{});
  m = vad.on_events(std::vector<events::Event>{events::SpeechStarted{0.42}}, 0.5);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]["type"], "SpeechStarted");
  EXPECT_DOUBLE_EQ(m[0]["timestamp"], 0.42);
}

TEST(DeepgramProjection, FinalizeErrorAndEndOfStream) {
  Projection p(options(true, 300), StreamInfo{});
  p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::SpeechEnded{0.6}}, 0.7);
  auto fin = p.on_finalized(0.8, 0.8);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0]["from_finalize"], true);
  EXPECT_EQ(fin[0]["is_final"], true);
  EXPECT_EQ(words_of(fin[0]), std::vector<std::string>{"a"});
  // The session's Finalized event (StreamSession::finalize) takes the same path.
  auto via_event = p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" b", 0.8, 0.9)}}, events::Finalized{0.95}}, 0.95);
  ASSERT_EQ(via_event.size(), 1u);
  EXPECT_EQ(via_event[0]["from_finalize"], true);
  EXPECT_EQ(words_of(via_event[0]), std::vector<std::string>{"b"});
  auto empty = p.on_finalized(1.0, 1.0);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(words_of(empty[0]).empty());
  EXPECT_DOUBLE_EQ(empty[0]["start"], 0.95);
  EXPECT_TRUE(p.on_events({}, 2.0).empty()) << "the finalized words are never sent again";

  Projection e(options(), StreamInfo{});
  auto err = e.on_events(std::vector<events::Event>{events::StreamError{"invalid audio: x"}, events::EndOfStream{}}, 0);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0]["type"], "Error");
  EXPECT_EQ(err[0]["description"], "invalid audio: x");
  EXPECT_TRUE(e.ended());

  // The end flushes a final still waiting for its endpoint.
  Projection w(options(true, 5000), StreamInfo{});
  auto last = w.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" z", 0, 0.5)}},
                                                     events::SpeechEnded{0.6}, events::EndOfStream{}},
                          0.7);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["speech_final"], true);
  EXPECT_TRUE(w.ended());
}

// Agents send Finalize as speech ends (LiveKit, Pipecat): the flush must not cancel the
// endpoint the VAD found, or speech_final (their end of turn) never comes.
TEST(DeepgramProjection, FinalizeKeepsAPendingEndpoint) {
  // The end of speech and the flush in one batch, the silence already past the endpoint.
  Projection p(options(true, 25), StreamInfo{});
  auto out = p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}},
                                                    events::SpeechEnded{0.6}, events::Finalized{0.7}},
                         0.75);
  ASSERT_EQ(of_type(out, "Results").size(), 1u);
  EXPECT_EQ(out[0]["is_final"], true);
  EXPECT_EQ(out[0]["from_finalize"], true);
  EXPECT_EQ(out[0]["speech_final"], true);
  EXPECT_EQ(words_of(out[0]), std::vector<std::string>{"a"});
  EXPECT_TRUE(p.on_events({}, 2.0).empty()) << "the turn ended once";

  // The flush before the endpoint is due: its final, then the endpoint's own (empty) final.
  Projection q(options(true, 300), StreamInfo{});
  out = q.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::SpeechEnded{0.6},
                                               events::Finalized{0.7}},
                    0.7);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["from_finalize"], true);
  EXPECT_EQ(out[0]["speech_final"], false);
  EXPECT_TRUE(q.on_events({}, 0.85).empty());
  out = q.on_events({}, 0.9);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["is_final"], true);
  EXPECT_EQ(out[0]["speech_final"], true);
  EXPECT_EQ(out[0]["from_finalize"], false);
  EXPECT_TRUE(words_of(out[0]).empty());

  // A flush before the VAD decided the end: the end of speech that follows is still an endpoint.
  Projection r(options(true, 25), StreamInfo{});
  out = r.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::Finalized{0.55}},
                    0.55);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["speech_final"], false);
  out = r.on_events(std::vector<events::Event>{events::SpeechEnded{0.52}}, 0.7);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["speech_final"], true);
}

// The endpoint counts silence on the clock of the audio the VAD heard: an end it decided
// is final at once when that silence covers `endpointing`, not after the model's look-ahead.
TEST(DeepgramProjection, EndpointIsDueOnTheHeardClock) {
  Projection p(options(true, 25), StreamInfo{});
  auto out = p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::SpeechEnded{0.52}}, 0.66);
  ASSERT_EQ(of_type(out, "Results").size(), 1u);
  EXPECT_EQ(out[0]["speech_final"], true);
}

TEST(DeepgramProjection, ForcedFinalCarriesHeldWordsAndTheProvisionalTail) {
  Projection p(options(true, 5000), StreamInfo{});
  p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::SpeechEnded{0.6},
                                         events::ProvisionalChanged{{word(" b", 0.7, 0.9), word(" c", 0.9, 1.1)}}},
              1.2);
  std::vector<json> forced = p.force_final();
  ASSERT_EQ(forced.size(), 1u);
  EXPECT_EQ(forced[0]["type"], "Results");
  EXPECT_EQ(forced[0]["is_final"], true);
  EXPECT_EQ(forced[0]["speech_final"], true);
  EXPECT_EQ(words_of(forced[0]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_DOUBLE_EQ(forced[0]["start"], 0.0);
  EXPECT_DOUBLE_EQ(forced[0]["duration"], 1.1);
  EXPECT_TRUE(p.ended());
  EXPECT_TRUE(p.force_final().empty()) << "sent once";
  EXPECT_TRUE(p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" d", 1.2, 1.4)}}}, 1.5).empty());

  // Nothing pending: no empty final.
  Projection q(options(), StreamInfo{});
  auto sent = q.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}}, 0.6);
  ASSERT_EQ(of_type(sent, "Results").size(), 1u);
  EXPECT_TRUE(q.force_final().empty());
  EXPECT_TRUE(q.ended());
}

// Audio the server skipped (a client in real time, a server behind): the words before it
// are final, a Warning names the span, and no Results window covers it.
TEST(DeepgramProjection, SkippedAudioIsAWarningAndNoWindowCoversIt) {
  Projection p(options(true, 10), StreamInfo{});
  std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::WordsCommitted{{word(" a", 0, 0.5)}}, events::SpeechEnded{0.5},
                                             events::AudioSkipped{0.5, 20.0}, events::SpeechStarted{20.0},
                                             events::WordsCommitted{{word(" b", 20.1, 20.5)}}},
                  20.6);
  std::vector<json> finals;
  for (const json& m : of_type(out, "Results"))
    if (m["is_final"]) finals.push_back(m);
  std::vector<json> warnings = of_type(out, "Warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0]["variant"], "audio_skipped");
  EXPECT_DOUBLE_EQ(warnings[0]["start"], 0.5);
  EXPECT_DOUBLE_EQ(warnings[0]["duration"], 19.5);
  EXPECT_NE(warnings[0]["description"].get<std::string>().find("skipped"), std::string::npos);
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(words_of(finals[0]), std::vector<std::string>{"a"});
  EXPECT_EQ(finals[0]["speech_final"], true) << "the endpoint before the skip ends its turn";
  EXPECT_DOUBLE_EQ(finals[0]["start"].get<double>() + finals[0]["duration"].get<double>(), 0.5);
  EXPECT_EQ(words_of(finals[1]), std::vector<std::string>{"b"});
  EXPECT_DOUBLE_EQ(finals[1]["start"], 20.0) << "the next window starts after the skipped span";
  // The Warning comes after the final of the words before it.
  size_t warning_at = 0, first_final_at = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i]["type"] == "Warning") warning_at = i;
    if (out[i] == finals[0]) first_final_at = i;
  }
  EXPECT_LT(first_final_at, warning_at);
}

TEST(DeepgramProjection, BatchedEventsJudgeEndpointsAndGapsOnTheirOwnClock) {
  // Seconds of audio in one batch (a session that fell behind): the pause is still an
  // endpoint and a word gap, judged on the events' times, not on the batch's end.
  Projection p(options(true, 300, 1000), StreamInfo{});
  std::vector<events::Event> batch = {
      events::SpeechStarted{0.1}, events::WordsCommitted{{word(" a", 0.2, 0.9)}}, events::SpeechEnded{1.0},
      events::SpeechStarted{3.0}, events::WordsCommitted{{word(" b", 3.1, 3.5)}}, events::EndOfStream{}};
  auto m = p.on_events(batch, 3.6);
  std::vector<json> results = of_type(m, "Results");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["speech_final"], true);
  EXPECT_EQ(words_of(results[0]), std::vector<std::string>{"a"});
  EXPECT_DOUBLE_EQ(results[0]["start"].get<double>() + results[0]["duration"].get<double>(), 1.0);
  EXPECT_EQ(words_of(results[1]), std::vector<std::string>{"b"});
  std::vector<json> ends = of_type(m, "UtteranceEnd");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_DOUBLE_EQ(ends[0]["last_word_end"], 0.9);
  // UtteranceEnd comes before the words that ended the gap.
  auto at = [&](const std::string& type, size_t nth) {
    size_t seen = 0;
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i]["type"] == type && seen++ == nth) return i;
    return m.size();
  };
  EXPECT_LT(at("UtteranceEnd", 0), at("Results", 1));
}

TEST(DeepgramProjection, LateWordsNeverReachIntoASentWindow) {
  Projection p(options(true, 10), StreamInfo{});
  p.on_events(std::vector<events::Event>{events::SpeechEnded{2.0}}, 2.5);  // an empty speech_final up to 2.0
  auto late = p.on_events(
      std::vector<events::Event>{events::WordsCommitted{{word(" x", 1.5, 1.8), word(" y", 1.9, 2.4)}}}, 2.6);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_DOUBLE_EQ(late[0]["start"], 2.0);
  const json& words = late[0]["channel"]["alternatives"][0]["words"];
  EXPECT_DOUBLE_EQ(words[0]["start"], 2.0);
  EXPECT_DOUBLE_EQ(words[0]["end"], 2.0);
  EXPECT_DOUBLE_EQ(words[1]["start"], 2.0);
  EXPECT_DOUBLE_EQ(words[1]["end"], 2.4);
}

// Multichannel: each channel's projection names its channel in every message it sends.
TEST(DeepgramProjection, AChannelsProjectionNamesItsChannel) {
  ListenOptions o = options(true, 10, 1000);
  o.vad_events = true;
  StreamInfo info;
  info.channels = 3;
  Projection p(o, info, 2);
  std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::SpeechStarted{0.0}, events::WordsCommitted{{word(" a", 0.0, 0.3)}},
                                             events::ProvisionalChanged{{word(" b", 0.4, 0.5)}},
                                             events::SpeechEnded{0.6}, events::ProvisionalChanged{}},
                  3.0);
  ASSERT_EQ(of_type(out, "Results").size(), 1u);  // the final (the batch leaves no interim)
  for (const json& m : of_type(out, "Results")) EXPECT_EQ(m["channel_index"], json::array({2, 3}));
  ASSERT_EQ(of_type(out, "SpeechStarted").size(), 1u);
  EXPECT_EQ(of_type(out, "SpeechStarted")[0]["channel"], json::array({2}));
  ASSERT_EQ(of_type(out, "UtteranceEnd").size(), 1u);
  EXPECT_EQ(of_type(out, "UtteranceEnd")[0]["channel"], json::array({2, 3}));
}

}  // namespace
}  // namespace earshot::deepgram

// Speakers in every protocol: the SpeakerGate holds diarized words until their
// speakers are named (and lets them go at the end of a stream regardless);
// WhisperLiveKit shows them as buffer_diarization meanwhile and splits lines at
// speaker changes; Deepgram's finals carry `speaker` from 0 (interims show the
// waiting words); the file renderings put speakers in txt, json, srt and vtt.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/deepgram/projection.h"
#include "protocol/speaker_gate.h"
#include "protocol/transcript.h"
#include "protocol/wlk/projection.h"

namespace earshot::protocol {
namespace {

using nlohmann::json;

Word word(const std::string& text, double start, double end, int speaker = -1) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.speaker = speaker;
  w.probability = 0.9f;
  return w;
}

events::WordsCommitted pending(std::vector<Word> words) { return {std::move(words), true}; }

TEST(SpeakerGate, HoldsDiarizedWordsAndWhatFollowsUntilNamed) {
  SpeakerGate gate;
  // Undiarized events pass unchanged.
  EXPECT_EQ(gate.pass(events::WordsCommitted{{word(" a", 0, 1)}}).size(), 1u);
  EXPECT_TRUE(gate.pass(pending({word(" b", 1, 2), word(" c", 2, 3)})).empty());
  EXPECT_TRUE(gate.pass(events::SpeechEnded{3}).empty());                           // behind the held words
  EXPECT_EQ(gate.pass(events::ProvisionalChanged{{word(" d", 3, 4)}}).size(), 1u);  // buffers pass
  ASSERT_EQ(gate.held_words().size(), 2u);
  // Word 1 (" b") named: " c" still waits, so nothing is released yet.
  EXPECT_TRUE(gate.pass(events::SpeakersAssigned{1, {2}}).empty());
  EXPECT_EQ(gate.held_words()[0].speaker, 2);
  const std::vector<events::Event> out = gate.pass(events::SpeakersAssigned{2, {1}});
  ASSERT_EQ(out.size(), 2u);
  const auto& words = std::get<events::WordsCommitted>(out[0]);
  EXPECT_FALSE(words.speakers_pending);
  EXPECT_EQ(words.words[0].speaker, 2);
  EXPECT_EQ(words.words[1].speaker, 1);
  EXPECT_TRUE(std::holds_alternative<events::SpeechEnded>(out[1]));
  EXPECT_TRUE(gate.held_words().empty());
  // A stream that ends (or fails) with words never named lets them go, unknown.
  EXPECT_TRUE(gate.pass(pending({word(" e", 4, 5)})).empty());
  const std::vector<events::Event> end = gate.pass(events::EndOfStream{});
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(std::get<events::WordsCommitted>(end[0]).words[0].speaker, -1);
}

TEST(SpeakersInWlk, WaitingWordsAreBufferDiarizationThenLinesSplitBySpeaker) {
  wlk::Projection p;
  p.apply(pending({word(" hello", 0, 1), word(" there", 1, 2), word(" hi", 2, 3)}));
  wlk::Snapshot s = p.snapshot({});
  EXPECT_TRUE(s.lines.empty());
  EXPECT_EQ(s.buffer_diarization, " hello there hi");
  p.apply(events::SpeakersAssigned{0, {1, 1, 2}});
  s = p.snapshot({});
  EXPECT_EQ(s.buffer_diarization, "");
  EXPECT_EQ(wlk::full_update(s)["lines"], json::parse(R"([
    {"speaker":1,"text":" hello there","start":"0:00:00.00","end":"0:00:02.00"},
    {"speaker":2,"text":" hi","start":"0:00:02.00","end":"0:00:03.00"}])"));
}

TEST(SpeakersInDeepgram, FinalsCarrySpeakersFromZeroInterimsShowWaitingWords) {
  deepgram::ListenOptions o;
  o.diarize = true;
  o.interim_results = true;
  o.endpointing_ms.reset();
  deepgram::Projection p(o, {});
  std::vector<events::Event> batch = {pending({word(" hello", 0, 1), word(" you", 1, 2)})};
  std::vector<json> out = p.on_events(batch, 2.0);
  ASSERT_EQ(out.size(), 1u);  // an interim with the waiting words, no final yet
  EXPECT_FALSE(out[0]["is_final"].get<bool>());
  EXPECT_EQ(out[0]["channel"]["alternatives"][0]["transcript"], "hello you");
  batch = {events::SpeakersAssigned{0, {1, 2}}};
  out = p.on_events(batch, 2.5);
  ASSERT_FALSE(out.empty());
  EXPECT_TRUE(out[0]["is_final"].get<bool>());
  const json& words = out[0]["channel"]["alternatives"][0]["words"];
  EXPECT_EQ(words[0]["speaker"], 0);
  EXPECT_EQ(words[1]["speaker"], 1);
}

TEST(SpeakersInFiles, CommittedWordsTakeTheirSpeakersAndEveryFormatShowsThem) {
  const std::vector<events::Event> log = {pending({word(" Hello.", 0, 1), word(" Hi", 1.5, 2)}),
                                          events::SpeakersAssigned{0, {1}}, pending({word(" there.", 2, 2.5)}),
                                          events::SpeakersAssigned{1, {2, 2}}, events::EndOfStream{}};
  const std::vector<Word> words = committed_words(log);
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[2].speaker, 2);
  EXPECT_EQ(transcript_turns(words), "[S1] Hello.\n[S2] Hi there.");
  EXPECT_EQ(transcript_text(words), "Hello. Hi there.");  // OpenAI's text stays plain
  EXPECT_EQ(words_json({words[0]}), "[{\"text\":\" Hello.\",\"start\":0.000,\"end\":1.000,\"speaker\":1}]");
  const std::vector<Segment> cues = segments(words);
  ASSERT_EQ(cues.size(), 2u);
  EXPECT_EQ(format_vtt(cues),
            "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n<v Speaker 1>Hello.\n\n"
            "00:00:01.500 --> 00:00:02.500\n<v Speaker 2>Hi there.\n\n");
  EXPECT_EQ(format_srt(cues).substr(0, 44), "1\n00:00:00,000 --> 00:00:01,000\n[S1] Hello.\n");
  const json verbose = json::parse(openai_json(words, cues, 3, "en", true));
  EXPECT_EQ(verbose["segments"][1]["speaker"], 2);
}

}  // namespace
}  // namespace earshot::protocol

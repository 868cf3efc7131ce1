// bench --turns: the turn datasets (clips cut at pauses, turns placed with their
// gaps and pauses), the scoring of probed events against reference turns (delays
// from each end of speech, false ends inside pauses, missed ends), and a run of
// the session pipeline with the turn stage on a clock that never waits.
#include "bench/turns.h"

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "../session/fakes.h"
#include "common/error.h"
#include "stages/turns/turn_stage.h"

namespace earshot::bench {
namespace {

TurnClip clip(const std::string& id, double seconds, std::vector<SpeechSpan> speech, int speaker = 0) {
  TurnClip c;
  c.id = id;
  c.samples.assign(static_cast<size_t>(seconds * 16000), 0.0f);
  c.speech = std::move(speech);
  c.speaker = speaker;
  return c;
}

TEST(TurnDataset, ClipsCutInTheMiddleOfTheirLongPauses) {
  const TurnClip c = clip("jfk", 6.0, {{0.2, 1.0}, {1.2, 2.0}, {3.0, 4.0}, {4.6, 5.8}});
  const std::vector<TurnClip> parts = split_at_pauses(c, 0.4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].samples.size(), 40000u);  // cut at 2.5 s, the middle of 2.0-3.0
  EXPECT_EQ(parts[0].speech.size(), 2u);       // the 0.2 s pause stays inside
  EXPECT_DOUBLE_EQ(parts[1].speech[0].start, 0.5);
  EXPECT_DOUBLE_EQ(parts[2].speech[0].start, 4.6 - 4.3);
  EXPECT_EQ(parts[2].samples.size(), static_cast<size_t>((6.0 - 4.3) * 16000 + 0.5));
}

TEST(TurnDataset, APhrasesWordsLieInsideItsOwnSpeech) {
  // The clip-wide estimate spreads words by characters over all of the speech, so
  // the short first phrase's last word may be timed to its span's very end.
  TurnClip c = clip("jfk", 6.0, {{0.2, 1.0}, {3.0, 5.8}});
  c.words = estimate_word_times("And so my fellow Americans ask not what your country can do", c.speech, 6.0);
  const std::vector<TurnClip> parts = split_at_pauses(c, 0.4);
  ASSERT_EQ(parts.size(), 2u);
  size_t words = 0;
  for (const TurnClip& part : parts) {
    ASSERT_FALSE(part.words.empty());
    words += part.words.size();
    const double audio = static_cast<double>(part.samples.size()) / 16000;
    for (const TimedWord& w : part.words) {
      EXPECT_GE(w.start, part.speech.front().start) << part.id << " " << w.text;
      EXPECT_LE(w.end, part.speech.back().end) << part.id << " " << w.text;
      EXPECT_LT(w.start, w.end) << part.id << " " << w.text;
    }
    // The last word ends inside the phrase, not at its speech's last instant.
    EXPECT_LT(part.words.back().start, part.speech.back().end - 0.05) << part.id;
    EXPECT_LE(part.words.back().end, audio);
  }
  EXPECT_EQ(words, c.words.size());
}

TEST(TurnDataset, MultiTurnJoinsOneTurnInThreeAndSpacesTurns) {
  std::vector<TurnClip> clips;
  for (int i = 0; i < 5; ++i) clips.push_back(clip("c" + std::to_string(i), 1.0, {{0.1, 0.9}}));
  const TurnStream s = make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 0);
  ASSERT_EQ(s.turns.size(), 4u);  // c0, c1, c2+c3, c4
  EXPECT_DOUBLE_EQ(s.turns[0].start, 0.6);
  EXPECT_DOUBLE_EQ(s.turns[0].end, 1.4);
  EXPECT_NEAR(s.turns[1].start, 1.5 + 0.8 + 0.1, 1e-9);  // after a 0.8 s gap
  ASSERT_EQ(s.turns[2].pauses.size(), 1u);
  EXPECT_NEAR(s.turns[2].pauses[0].end - s.turns[2].pauses[0].start, 0.1 + 0.3 + 0.1, 1e-9);
  EXPECT_TRUE(s.turns[3].pauses.empty());
  EXPECT_NEAR(static_cast<double>(s.samples.size()) / 16000, 0.5 + 5 * 1.0 + 0.8 + 1.5 + 0.3 + 3.0 + 0.8 + 2.0, 1e-9);
  const TurnStream r = make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 2);
  EXPECT_EQ(r.id, "multi-turn-2");
  // A later start (bench's --turn-stagger): the same turns, shifted by the longer lead-in.
  const TurnStream late = make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 0, 1.75);
  ASSERT_EQ(late.turns.size(), s.turns.size());
  for (size_t i = 0; i < s.turns.size(); ++i) {
    EXPECT_NEAR(late.turns[i].start - s.turns[i].start, 1.25, 1e-9);
    EXPECT_NEAR(late.turns[i].end - s.turns[i].end, 1.25, 1e-9);
  }
  EXPECT_EQ(late.samples.size(), s.samples.size() + 20000u);
  EXPECT_THROW(make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 0, -0.1), Error);
}

TEST(TurnReport, JsonListsEveryTurnWithItsDelays) {
  NamedTurnRun named;
  named.system = "alignatt";
  named.run.audio_seconds = 40;
  named.run.elapsed_seconds = 12;
  named.run.errors = {"s1: \"bad\""};
  named.run.score.pauses = 3;
  named.run.score.false_ends = 1;
  TurnDelays a;
  a.stream = 1;
  a.turn = 2;
  a.end_of_speech = 8.5;
  a.vad = 0.25;
  a.end_of_turn = 0.5;
  a.reason = "silence";
  a.last_part_has_words = true;
  named.run.score.turns = {a, TurnDelays{}};
  std::ostringstream out;
  write_turns_json(out, {named});
  const std::string json = out.str();
  EXPECT_NE(json.find("\"system\": \"alignatt\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors\": [\"s1: \\\"bad\\\"\"]"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"stream\": 1, \"turn\": 2, \"end_of_speech\": 8.5, \"vad\": 0.25, \"final_text\": null, "
                      "\"end_of_turn\": 0.5, \"reason\": \"silence\", \"text_continues\": false, "
                      "\"last_part_has_words\": true}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"pauses\": 3, \"false_ends\": 1, \"missed_ends\": 0"), std::string::npos) << json;
  std::ostringstream none;
  write_turns_json(none, {});
  EXPECT_EQ(none.str(), "{\"turns\": [\n]}\n");
}

TEST(TurnDataset, TwoSpeakersAlternate) {
  std::vector<TurnClip> clips = {clip("a0", 1.0, {{0.1, 0.9}}, 0), clip("a1", 1.0, {{0.1, 0.9}}, 0),
                                 clip("b0", 2.0, {{0.2, 1.8}}, 1)};
  const TurnStream s = make_turn_stream(TurnDatasetKind::kTwoSpeaker, clips, 0);
  ASSERT_EQ(s.turns.size(), 4u);
  for (size_t i = 0; i < s.turns.size(); ++i) EXPECT_EQ(s.turns[i].speaker, static_cast<int>(i % 2));
  EXPECT_NEAR(s.turns[1].start - s.turns[0].end, 0.1 + 0.4 + 0.2, 1e-9);
  EXPECT_THROW(make_turn_stream(TurnDatasetKind::kTwoSpeaker, {clips[0]}, 0), Error);
  EXPECT_THROW(parse_turn_dataset_kind("three"), Error);
}

events::TurnEnded ended(double at, const char* reason = "silence") {
  events::TurnEnded e;
  e.at = at;
  e.evidence.reason = reason;
  return e;
}

TEST(TurnScoring, DelaysFromEachEndOfSpeechFalseAndMissedEnds) {
  TurnStream s;
  s.turns = {{1.0, 2.0, {{1.4, 1.6}}, 0}, {3.0, 4.0, {}, 0}, {6.0, 7.0, {}, 0}};
  Word a;
  a.start = 1.0;
  a.end = 1.4;
  Word b = a;
  b.start = 1.6;
  b.end = 2.0;
  Word c = a;
  c.start = 3.0;
  c.end = 4.0;
  const std::vector<ProbedEvent> events = {
      {1.55, events::TurnEnded(ended(1.42))},  // inside the pause: a false end
      {2.12, events::SpeechEnded{2.03}},
      {2.20, events::WordsCommitted{{a}}},
      {2.25, events::WordsCommitted{{b}}},
      {2.30, events::Event(ended(2.03))},
      {4.10, events::SpeechEnded{4.03}},
      {4.15, events::WordsCommitted{{c}}},
      {4.40, events::Event([] {
         events::TurnEnded e = ended(4.03, "timeout");
         e.evidence.trailing_continuation = true;
         return e;
       }())},
  };
  const TurnScore score = score_turns(s, events, 3);
  ASSERT_EQ(score.turns.size(), 3u);
  EXPECT_EQ(score.pauses, 1);
  EXPECT_EQ(score.false_ends, 1);
  EXPECT_EQ(score.missed_ends, 1);  // the third turn never ended
  const TurnDelays& t0 = score.turns[0];
  EXPECT_EQ(t0.stream, 3);
  EXPECT_NEAR(*t0.vad, 0.12, 1e-9);
  EXPECT_NEAR(*t0.final_text, 0.25, 1e-9);
  EXPECT_NEAR(*t0.end_of_turn, 0.30, 1e-9) << "the false end inside the pause is not the turn's end";
  EXPECT_NEAR(*score.turns[1].end_of_turn, 0.40, 1e-9);
  EXPECT_EQ(score.turns[1].reason, "timeout");
  EXPECT_FALSE(t0.text_continues);
  EXPECT_TRUE(score.turns[1].text_continues);
  EXPECT_FALSE(score.turns[2].end_of_turn);
  EXPECT_FALSE(score.turns[2].final_text);
  EXPECT_NEAR(*delay_percentile(score.turns, &TurnDelays::end_of_turn, 0.5), 0.35, 1e-9);
  EXPECT_FALSE(delay_percentile({}, &TurnDelays::end_of_turn, 0.5));
}

// Virtual time that moves a frame per sleep, with a short real pause so the workers keep up
// (the run gives up after ~4 s of real time: three times the audio plus 60 s, virtual).
class FastClock : public Clock {
 public:
  double now() override { return now_.load(); }
  void sleep_until(double t) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    now_ = std::max(now_.load(), t);
  }

 private:
  std::atomic<double> now_{0};
};

TEST(TurnRun, EveryTurnOfEveryStreamEnds) {
  using namespace earshot::testing;
  // Clips of tone the fake VAD hears as speech, their speech known.
  std::vector<TurnClip> clips;
  for (int i = 0; i < 3; ++i) {
    TurnClip c;
    c.id = "t" + std::to_string(i);
    c.samples = tone(0.8, 0.1f * static_cast<float>(i + 1));
    c.speech = {{0.0, 0.8}};
    clips.push_back(std::move(c));
  }
  std::vector<TurnStream> streams = {make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 0),
                                     make_turn_stream(TurnDatasetKind::kMultiTurn, clips, 1)};
  TurnRunOptions options;
  options.workers = 2;
  options.stream.min_step_seconds = 0.04;
  options.vad = [] { return std::make_unique<FakeVad>(); };
  FastClock clock;
  const TurnRun run = run_turns(
      [](int) {
        TurnBenchStream s;
        s.processor = std::make_unique<FakeProcessor>();
        s.stages.push_back(std::make_unique<stages::turns::TurnStage>(stages::turns::TurnSettings{}));
        return s;
      },
      streams, options, &clock);
  EXPECT_TRUE(run.errors.empty());
  ASSERT_EQ(run.score.turns.size(), 6u);  // two streams of three turns
  EXPECT_EQ(run.score.missed_ends, 0);
  for (const TurnDelays& t : run.score.turns) {
    EXPECT_TRUE(t.vad);
    EXPECT_TRUE(t.final_text);
    EXPECT_TRUE(t.end_of_turn);
  }
}

}  // namespace
}  // namespace earshot::bench

// WhisperLiveKit's lines and buffer as a projection of a session's events: the
// line rules on scripted events, a stage of the chain visible on the wire, and
// the projection releasing what it read.
#include <gtest/gtest.h>

#include <cctype>

#include "../session/fakes.h"
#include "protocol/wlk/projection.h"

namespace earshot::protocol::wlk {
namespace {

using namespace earshot::testing;
using nlohmann::json;

Word word(const std::string& text, double start, double end, int speaker = -1, const std::string& language = "") {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.speaker = speaker;
  w.language = language;
  return w;
}

TEST(WlkProjection, WordsPausesSpeakersAndBuffer) {
  Projection p;
  p.apply(events::SpeechStarted{0.0});
  p.apply(events::WordsCommitted{{word(" a", 0, 1, -1, "en"), word(" b", 1, 2)}});
  p.apply(events::ProvisionalChanged{{word(" c", 2, 2.5), word(" d", 2.5, 3)}});
  session::StreamStatus status;
  status.received_seconds = 3;
  Snapshot s = p.snapshot(status);
  ASSERT_EQ(s.lines.size(), 1u);
  EXPECT_EQ(s.lines[0].text, " a b");
  EXPECT_EQ(s.lines[0].detected_language, "en");  // a word without a language keeps the line's
  EXPECT_DOUBLE_EQ(s.lines[0].end, 2);
  EXPECT_EQ(s.buffer_transcription, " c d");
  EXPECT_DOUBLE_EQ(s.received_seconds, 3);
  // A pause going on: one silence line whose end moves, then closed; the next word opens a line.
  p.apply(events::Pause{3, 8, true});
  p.apply(events::Pause{3, 9, true});
  p.apply(events::Pause{3, 9.5, false});
  p.apply(events::ProvisionalChanged{});
  p.apply(events::WordsCommitted{{word(" e", 9.5, 10)}});
  // Another speaker opens a line; back to speaker 1 (or none) opens another.
  p.apply(events::WordsCommitted{{word(" f", 10, 11, 2), word(" g", 11, 12, 1), word(" h", 12, 13)}});
  p.apply(events::Pause{13, 20, false});  // a pause that is over when first seen
  s = p.snapshot({});
  EXPECT_EQ(full_update(s)["lines"], json::parse(R"([
    {"speaker":1,"text":" a b","start":"0:00:00.00","end":"0:00:02.00","detected_language":"en"},
    {"speaker":-2,"text":"","start":"0:00:03.00","end":"0:00:09.50"},
    {"speaker":1,"text":" e","start":"0:00:09.50","end":"0:00:10.00"},
    {"speaker":2,"text":" f","start":"0:00:10.00","end":"0:00:11.00"},
    {"speaker":1,"text":" g h","start":"0:00:11.00","end":"0:00:13.00"},
    {"speaker":-2,"text":"","start":"0:00:13.00","end":"0:00:20.00"}])"));
  EXPECT_EQ(s.buffer_transcription, "");
}

// Upper-cases committed words, as a stage of the session's chain.
class UpperCase : public stages::Stage {
 public:
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (const auto* words = std::get_if<events::WordsCommitted>(&event)) {
      events::WordsCommitted out = *words;
      for (Word& w : out.words)
        for (char& c : w.text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return emit(std::move(out));
    }
    emit(event);
  }
};

// Turn events (stages/turns) show as the update's "turn" (an addition); no turn, no field.
TEST(WlkProjection, TheSpeakersTurnIsAScalarOfTheUpdate) {
  Projection p;
  EXPECT_FALSE(full_update(p.snapshot({})).contains("turn"));
  p.apply(events::TurnStarted{0, 0.5});
  json u = full_update(p.snapshot({}));
  EXPECT_EQ(u["turn"], (json{{"index", 0}, {"state", "speaking"}, {"at", 0.5}}));
  p.apply(events::TurnEndLikely{0, 1.25, 0.6, {}});
  EXPECT_EQ(full_update(p.snapshot({}))["turn"]["state"], "likely_over");
  p.apply(events::TurnResumed{0, 1.5});
  EXPECT_EQ(full_update(p.snapshot({}))["turn"]["state"], "speaking");
  p.apply(events::TurnEnded{0, 2.0, 0.9, {}});
  u = full_update(p.snapshot({}));
  EXPECT_EQ(u["turn"], (json{{"index", 0}, {"state", "ended"}, {"at", 2.0}}));
  // In diff mode the turn travels with the scalars.
  UpdateEncoder diff(true);
  json first = *diff.next(p.snapshot({}));
  EXPECT_EQ(first["turn"]["state"], "ended");
  p.apply(events::TurnStarted{1, 3.0});
  json next = *diff.next(p.snapshot({}));
  EXPECT_EQ(next["turn"]["index"], 1);
}

TEST(WlkProjection, AStageOfTheChainShowsInTheWireOutput) {
  std::vector<std::unique_ptr<stages::Stage>> chain;
  chain.push_back(std::make_unique<UpperCase>());
  session::StreamSession staged(std::make_unique<FakeProcessor>(), std::make_unique<FakeVad>(), {}, {},
                                std::move(chain));
  session::StreamSession plain(std::make_unique<FakeProcessor>(), std::make_unique<FakeVad>(), {});
  for (session::StreamSession* s : {&staged, &plain}) {
    s->push_audio(concat({tone(1.0, 0.1f), silence(6.0), tone(1.0, 0.3f)}));
    s->end_of_stream();
    while (s->has_work()) s->step();
  }
  json upper = full_update(snapshot_of(staged));
  json lower = full_update(snapshot_of(plain));
  ASSERT_EQ(lower["lines"].size(), 3u);
  EXPECT_EQ(lower["lines"][0]["text"], " w100 w100");
  EXPECT_EQ(upper["lines"][0]["text"], " W100 W100");
  EXPECT_EQ(upper["lines"][2]["text"], " W286 W300");
  // Everything but the text is the same.
  for (json* update : {&upper, &lower})
    for (json& line : (*update)["lines"]) line["text"] = "";
  EXPECT_EQ(upper, lower);
}

TEST(WlkProjection, TranslationGoesOnTheSegmentsLineAndTheDraftInTheBuffer) {
  Projection p;
  session::StreamStatus status;
  p.apply(events::WordsCommitted{{word(" a", 0, 1), word(" b.", 1, 4.5)}});
  p.apply(events::TranslationCommitted{0, 0, "A"});
  p.apply(events::TranslationDraftChanged{0, 0, " B."});
  Snapshot s = p.snapshot(status);
  ASSERT_EQ(s.lines.size(), 1u);
  EXPECT_EQ(s.lines[0].translation, "A");
  EXPECT_EQ(s.buffer_translation, " B.");
  json update = full_update(s);
  EXPECT_EQ(update["lines"][0]["translation"], "A");
  EXPECT_EQ(update["buffer_translation"], " B.");
  // The next segment starts in the same line; the first one's final replaces its committed text.
  p.apply(events::WordsCommitted{{word(" c", 5, 6)}});
  p.apply(events::TranslationCommitted{1, 5, "C"});
  p.apply(events::SegmentTranslated{0, 0, 4.5, "a b.", "A B!"});
  s = p.snapshot(status);
  EXPECT_EQ(s.lines[0].translation, "A B! C");
  EXPECT_EQ(s.buffer_translation, "");  // the draft belonged to the closed segment
  // After a pause, a new line carries the next segment.
  p.apply(events::Pause{6, 12, false});
  p.apply(events::WordsCommitted{{word(" d", 12, 13)}});
  p.apply(events::TranslationDraftChanged{2, 12, "D"});
  p.apply(events::SegmentTranslated{1, 5, 6, "c", "C"});
  p.apply(events::SegmentTranslated{2, 12, 13, "d", "D"});
  s = p.snapshot(status);
  ASSERT_EQ(s.lines.size(), 3u);
  EXPECT_EQ(s.lines[0].translation, "A B! C");
  EXPECT_EQ(s.lines[1].translation, "");                        // the silence line
  EXPECT_FALSE(line_json(s.lines[1]).contains("translation"));  // present only when non-empty
  EXPECT_EQ(s.lines[2].translation, "D");
}

TEST(WlkProjection, PullReleasesWhatItReadAndKeepsTheLines) {
  session::StreamSession s(std::make_unique<FakeProcessor>(), nullptr, {});
  Projection p;
  std::vector<float> audio = tone(0.5, 0.1f);
  for (int i = 0; i < 100; ++i) {
    s.push_audio(audio);
    while (s.has_work()) s.step();
    Snapshot snap = p.pull(s);
    ASSERT_EQ(snap.lines.size(), 1u);
    EXPECT_DOUBLE_EQ(snap.lines[0].end, 0.5 * (i + 1));
    EXPECT_TRUE(s.events_since(0).events.empty());
  }
  s.end_of_stream();
  while (s.has_work()) s.step();
  Snapshot last = p.pull(s);
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.lines[0].text.size(), 100 * std::string(" w100").size());
}

}  // namespace
}  // namespace earshot::protocol::wlk

// The event log of a stream session: the exact events for scripted audio, the
// stage chain, bounded memory with release_until, finalize, errors.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <memory>

#include "fakes.h"
#include "session/stream_session.h"

namespace earshot::session {
namespace {

using namespace earshot::testing;

std::string seconds(double t) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", t);
  return text;
}

std::string words_text(const std::vector<Word>& words) {
  std::string out;
  for (const Word& w : words) out += w.text + "@" + seconds(w.start) + "-" + seconds(w.end) + "/" + w.language;
  return out;
}

// One line per event, in the log's order.
std::string describe(const std::vector<events::Event>& log) {
  std::string out;
  for (const events::Event& event : log) {
    std::visit(
        [&](const auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, events::WordsCommitted>) out += "words" + words_text(e.words);
          if constexpr (std::is_same_v<T, events::ProvisionalChanged>) out += "tail" + words_text(e.words);
          if constexpr (std::is_same_v<T, events::SpeechStarted>) out += "speech+ " + seconds(e.at);
          if constexpr (std::is_same_v<T, events::SpeechEnded>) out += "speech- " + seconds(e.at);
          if constexpr (std::is_same_v<T, events::Pause>)
            out += "pause " + seconds(e.start) + "-" + seconds(e.end) + (e.ongoing ? " ongoing" : "");
          if constexpr (std::is_same_v<T, events::LanguageDetected>) out += "language " + e.language;
          if constexpr (std::is_same_v<T, events::StreamError>) out += "error " + e.message;
          if constexpr (std::is_same_v<T, events::Finalized>) out += "finalized " + seconds(e.at);
          if constexpr (std::is_same_v<T, events::EndOfStream>) out += "end";
          if constexpr (std::is_same_v<T, events::AudioSkipped>)
            out += "skipped " + seconds(e.start) + "-" + seconds(e.end);
        },
        event);
    out += "\n";
  }
  return out;
}

std::string all_events(const StreamSession& s) { return describe(s.events_since(0).events); }

struct Harness {
  FakeProcessor* processor = nullptr;
  std::unique_ptr<StreamSession> session;
  explicit Harness(bool with_vad, std::vector<std::unique_ptr<stages::Stage>> chain = {},
                   std::unique_ptr<FakeProcessor> p = std::make_unique<FakeProcessor>()) {
    processor = p.get();
    std::unique_ptr<VoiceActivityDetector> vad;
    if (with_vad) vad = std::make_unique<FakeVad>();
    session = std::make_unique<StreamSession>(
        std::move(p), std::move(vad), StreamOptions{}, [] { return 0.0; }, std::move(chain));
  }
  void push_and_step(const std::vector<float>& audio) {
    session->push_audio(audio);
    while (session->has_work()) session->step();
  }
  void end() {
    session->end_of_stream();
    while (session->has_work()) session->step();
  }
};

TEST(StreamEvents, WithoutVadWordsTailLanguageAndEnd) {
  Harness h(false);
  h.push_and_step(tone(0.7, 0.1f));
  EXPECT_EQ(all_events(*h.session),
            "language en\n"
            "words w100@0.000-0.500/en\n"
            "tail ~@0.500-0.700/\n");
  h.push_and_step(tone(0.4, 0.2f));
  h.end();
  // The second step commits the window 0.5-1.0 (mean of 0.2 s at 0.1 and 0.3 s at 0.2);
  // the flush commits the 0.1 s left; the tail empties, then the stream ends.
  EXPECT_EQ(all_events(*h.session),
            "language en\n"
            "words w100@0.000-0.500/en\n"
            "tail ~@0.500-0.700/\n"
            "words w160@0.500-1.000/en\n"
            "tail ~@1.000-1.100/\n"
            "words p200@1.000-1.100/en\n"
            "tail\n"
            "end\n");
  EXPECT_TRUE(h.session->status().finished);
}

TEST(StreamEvents, VadSpeechStartEndAndPauses) {
  Harness h(true);
  h.push_and_step(concat({tone(1.0, 0.1f), silence(6.0), tone(1.0, 0.3f)}));
  h.end();
  // One step over all 8 s: speech from sample 0 to the window ending at 1.024 s,
  // a pause over the pause-segmentation length (5 s) to 6.976 s, speech again
  // with the VAD's last 2048 samples held back (the tail), flushed at the end.
  EXPECT_EQ(all_events(*h.session),
            "speech+ 0.000\n"
            "language en\n"
            "words w100@0.000-0.500/en w100@0.500-1.000/en\n"
            "speech- 1.024\n"
            "pause 1.024-6.976\n"
            "speech+ 6.976\n"
            "words w286@6.976-7.476/en\n"
            "tail ~@7.476-7.872/\n"
            "words w300@7.476-7.976/en\n"
            "tail\n"
            "end\n");
}

TEST(StreamEvents, OngoingPauseIsReemittedWithLaterEndsThenClosedAtTheEnd) {
  Harness h(true);
  h.push_and_step(concat({tone(1.0, 0.1f), silence(4.0)}));
  h.push_and_step(silence(3.0));
  h.push_and_step(silence(1.0));
  h.end();
  const std::string log = all_events(*h.session);
  // Decided up to the audio minus the VAD's delay (2048 samples) while it goes on.
  EXPECT_NE(log.find("speech- 1.024\npause 1.024-7.872 ongoing\npause 1.024-8.872 ongoing\n"
                     "pause 1.024-9.000\nend\n"),
            std::string::npos)
      << log;
}

// Upper-cases committed words; forwards everything else.
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

// Drops tails and repeats every end of speech: a stage may emit fewer or more events.
class DropTailsDoubleEnds : public stages::Stage {
 public:
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (std::holds_alternative<events::ProvisionalChanged>(event)) return;
    emit(event);
    if (std::holds_alternative<events::SpeechEnded>(event)) emit(event);
  }
};

TEST(StreamEvents, StagesRunInOrderBeforeTheLog) {
  std::vector<std::unique_ptr<stages::Stage>> chain;
  chain.push_back(std::make_unique<UpperCase>());
  chain.push_back(std::make_unique<DropTailsDoubleEnds>());
  Harness h(true, std::move(chain));
  // The end of speech (0.704 s: the last window holding tone) flushes both words at once.
  h.push_and_step(concat({tone(0.7, 0.1f), silence(1.0)}));
  h.end();
  EXPECT_EQ(all_events(*h.session),
            "speech+ 0.000\n"
            "language en\n"
            "words W100@0.000-0.500/en P98@0.500-0.704/en\n"
            "speech- 0.704\n"
            "speech- 0.704\n"
            "end\n");
}

TEST(StreamEvents, ReleasedEventsAreDroppedSoTheLogStaysBounded) {
  Harness h(false);
  uint64_t cursor = 0;
  size_t read = 0, most_retained = 0;
  std::string words;
  for (int i = 0; i < 2000; ++i) {  // 1000 s of audio, half a second at a time
    h.push_and_step(tone(0.5, 0.1f));
    EventBatch batch = h.session->events_since(cursor);
    EXPECT_EQ(batch.next, cursor + batch.events.size());
    read += batch.events.size();
    cursor = batch.next;
    h.session->release_until(cursor);
    most_retained = std::max(most_retained, h.session->events_since(0).events.size());
    for (const auto& e : batch.events)
      if (const auto* w = std::get_if<events::WordsCommitted>(&e)) words += w->words.front().text;
  }
  EXPECT_EQ(most_retained, 0u);  // everything read was released
  EXPECT_GE(read, 2000u);        // at least the words of every half second
  EXPECT_EQ(words.size(), 2000u * std::string(" w100").size());
  // A cursor from before the released part reads from the oldest retained event.
  h.push_and_step(tone(0.5, 0.1f));
  EventBatch late = h.session->events_since(0);
  EXPECT_EQ(late.next, cursor + late.events.size());
  EXPECT_EQ(describe(late.events), "words w100@1000.000-1000.500/en\n");
}

TEST(StreamEvents, WithoutReleasesTheLogKeepsEverything) {
  Harness h(false);
  for (int i = 0; i < 10; ++i) h.push_and_step(tone(0.5, 0.1f));
  h.end();
  EventBatch batch = h.session->events_since(0);
  EXPECT_EQ(batch.next, batch.events.size());
  EXPECT_EQ(std::count_if(batch.events.begin(), batch.events.end(),
                          [](const events::Event& e) { return std::holds_alternative<events::WordsCommitted>(e); }),
            10);
  EXPECT_TRUE(batch.status.finished);
  EXPECT_TRUE(std::holds_alternative<events::EndOfStream>(batch.events.back()));
  EXPECT_EQ(h.session->events_since(batch.next).events.size(), 0u);
}

TEST(StreamEvents, FinalizeFlushesWithoutEndingTheStream) {
  Harness h(false);
  h.push_and_step(tone(0.7, 0.1f));
  h.session->finalize();
  ASSERT_TRUE(h.session->has_work());
  const uint64_t before = h.session->events_since(0).next;
  h.session->step();
  // The 0.2 s tail is committed by the flush, then Finalized; speech resumes at once.
  EXPECT_EQ(describe(h.session->events_since(before).events),
            "words p100@0.500-0.700/en\n"
            "tail\n"
            "finalized 0.700\n");
  EXPECT_FALSE(h.session->has_work());
  EXPECT_FALSE(h.session->status().finished);
  ASSERT_EQ(h.processor->silences_.size(), 1u);
  EXPECT_DOUBLE_EQ(h.processor->silences_[0].first, 0.0);   // no silence inserted
  EXPECT_DOUBLE_EQ(h.processor->silences_[0].second, 0.7);  // resumed where the audio ended
  // The stream goes on: later audio gets later times.
  const uint64_t after = h.session->events_since(0).next;
  h.push_and_step(tone(0.5, 0.3f));
  EXPECT_EQ(describe(h.session->events_since(after).events), "words w300@0.700-1.200/en\n");
}

TEST(StreamEvents, FinalizeHandsTheModelAudioTheVadHasNotDecidedOn) {
  Harness h(true);
  h.push_and_step(tone(0.7, 0.1f));
  // The VAD holds the last 2048 samples back: only 0.572 s reached the model.
  EXPECT_EQ(h.processor->inserted(), 11200u - 2048u);
  h.session->finalize();
  const uint64_t before = h.session->events_since(0).next;
  h.session->step();
  EXPECT_EQ(h.processor->inserted(), 11200u);
  EXPECT_EQ(describe(h.session->events_since(before).events),
            "words p100@0.500-0.700/en\n"
            "tail\n"
            "finalized 0.700\n");
}

TEST(StreamEvents, FinalizeWaitsForAllWaitingAudio) {
  StreamOptions options;
  options.max_step_seconds = 0.5;
  auto p = std::make_unique<FakeProcessor>();
  StreamSession s(std::move(p), nullptr, options, [] { return 0.0; });
  s.push_audio(tone(1.2, 0.1f));
  s.finalize();
  s.step();  // 0.5 s of 1.2: not yet
  EXPECT_EQ(describe(s.events_since(0).events).find("finalized"), std::string::npos);
  while (s.has_work()) s.step();
  // Each step committed its whole windows: the tail was empty all along.
  EXPECT_NE(describe(s.events_since(0).events).find("words p100@1.000-1.200/en\nfinalized 1.200\n"), std::string::npos)
      << describe(s.events_since(0).events);
}

// A finalize flushes at the audio received when it was asked: audio that arrives
// before the step answers it is not flushed with it (OpenAI Realtime's clear then
// append then commit, Deepgram's Finalize mid-stream).
TEST(StreamEvents, FinalizeFlushesAtThePositionItWasAskedAt) {
  StreamOptions options;
  auto p = std::make_unique<FakeProcessor>();
  StreamSession s(std::move(p), nullptr, options, [] { return 0.0; });
  s.push_audio(tone(0.7, 0.1f));
  EXPECT_EQ(s.finalize(), 1u);
  s.push_audio(tone(1.0, 0.3f));  // arrives before any step
  while (s.has_work()) s.step();
  const std::string events = describe(s.events_since(0).events);
  // The flush cut the 0.2 s tail of the first tone at 0.7 s; the second tone's two
  // windows follow whole.
  EXPECT_NE(events.find("p100@0.500-0.700/en\nfinalized 0.700\nwords w300@0.700-1.200/en w300@1.200-1.700/en"),
            std::string::npos)
      << events;
}

TEST(StreamEvents, FinalizeDuringAPauseOnlySaysSo) {
  Harness h(true);
  h.push_and_step(concat({tone(0.5, 0.1f), silence(1.0)}));
  const uint64_t before = h.session->events_since(0).next;
  const size_t resumes = h.processor->silences_.size();  // the speech start at 0
  h.session->finalize();
  h.session->step();
  // 1.5 s minus the VAD's delay: the pause keeps its undecided audio.
  EXPECT_EQ(describe(h.session->events_since(before).events), "finalized 1.372\n");
  EXPECT_EQ(h.processor->silences_.size(), resumes);  // the model was not flushed and resumed
}

// Requests made before the step that answers them are answered together; the
// Finalized says how many, so a caller that numbered its requests knows which.
TEST(StreamEvents, FinalizedCountsTheRequestsItAnswers) {
  Harness h(false);
  h.push_and_step(tone(0.5, 0.1f));
  EXPECT_EQ(h.session->finalize(), 1u);
  EXPECT_EQ(h.session->finalize(), 2u);
  uint64_t before = h.session->events_since(0).next;
  h.session->step();
  auto answered = [&] {
    std::vector<uint64_t> out;
    for (const events::Event& e : h.session->events_since(before).events)
      if (const auto* f = std::get_if<events::Finalized>(&e)) out.push_back(f->requests);
    return out;
  };
  EXPECT_EQ(answered(), (std::vector<uint64_t>{2}));
  EXPECT_EQ(h.session->finalize(), 3u);
  before = h.session->events_since(0).next;
  h.session->step();
  EXPECT_EQ(answered(), (std::vector<uint64_t>{3}));
  h.end();
  EXPECT_EQ(h.session->finalize(), 0u);  // after the end: no Finalized will come
}

TEST(StreamEvents, FailureIsAnErrorThenTheEndAndNothingAfter) {
  Harness h(false);
  h.push_and_step(tone(0.5, 0.1f));
  h.push_and_step(std::vector<float>(8000, 0.5f));
  EXPECT_EQ(all_events(*h.session),
            "language en\n"
            "words w100@0.000-0.500/en\n"
            "error fake model refuses a window of constant 0.5\n"
            "end\n");
  EXPECT_EQ(h.session->status().error, "fake model refuses a window of constant 0.5");
  h.session->fail("again");  // a second failure adds nothing
  h.session->finalize();
  EXPECT_FALSE(h.session->has_work());
  EXPECT_EQ(h.session->events_since(0).events.size(), 4u);
}

TEST(StreamEvents, FailFromOutsideEndsTheLog) {
  Harness h(false);
  h.session->fail("client disconnected");
  EXPECT_EQ(all_events(*h.session), "error client disconnected\nend\n");
}

// Detects nothing until it has heard a full window, then "fr", then "de".
class ChangingLanguage : public FakeProcessor {
 public:
  std::string language() const override {
    if (inserted() < 8000) return "";
    return inserted() < 24000 ? "fr" : "de";
  }
};

TEST(StreamEvents, LanguageDetectedWhenKnownAndWhenItChanges) {
  Harness h(false, {}, std::make_unique<ChangingLanguage>());
  h.push_and_step(tone(0.25, 0.1f));
  EXPECT_EQ(all_events(*h.session), "tail ~@0.000-0.250/\n");
  h.push_and_step(tone(0.25, 0.1f));
  h.push_and_step(tone(0.5, 0.1f));
  h.push_and_step(tone(0.5, 0.1f));
  h.push_and_step(tone(0.5, 0.1f));
  EXPECT_EQ(all_events(*h.session),
            "tail ~@0.000-0.250/\n"
            "language fr\n"
            "words w100@0.000-0.500/fr\n"
            "tail\n"
            "words w100@0.500-1.000/fr\n"
            "language de\n"
            "words w100@1.000-1.500/de\n"
            "words w100@1.500-2.000/de\n");
}

// Records each advance() and marks it in the log with a TurnStarted whose `at` is the clock.
class ClockProbe : public stages::Stage {
 public:
  explicit ClockProbe(std::vector<double>* heard) : heard_(heard) {}
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override { emit(event); }
  void advance(double heard, const std::function<void(events::Event)>& emit) override {
    heard_->push_back(heard);
    emit(events::TurnStarted{0, heard});
  }

 private:
  std::vector<double>* heard_;
};

std::string with_ticks(const std::vector<events::Event>& log) {
  std::string out;
  for (const events::Event& e : log) {
    if (const auto* t = std::get_if<events::TurnStarted>(&e)) {
      out += "tick " + seconds(t->at) + "\n";
    } else {
      out += describe({e});
    }
  }
  return out;
}

TEST(StreamEvents, StagesAdvanceOncePerStepAfterItsEventsOnTheHeardClock) {
  std::vector<double> heard;
  std::vector<std::unique_ptr<stages::Stage>> chain;
  chain.push_back(std::make_unique<ClockProbe>(&heard));
  chain.push_back(std::make_unique<UpperCase>());  // the tick's events run through the stages after it
  Harness h(true, std::move(chain));
  h.push_and_step(concat({tone(0.7, 0.1f), silence(0.3)}));
  h.push_and_step(silence(0.2));
  h.end();
  // Each step ends with its tick, before the end of the stream; the clock is all the
  // audio the VAD heard, not the model's audio (held back 2048 samples).
  EXPECT_EQ(with_ticks(h.session->events_since(0).events),
            "speech+ 0.000\n"
            "language en\n"
            "words W100@0.000-0.500/en P98@0.500-0.704/en\n"
            "speech- 0.704\n"
            "tick 1.000\n"
            "tick 1.200\n"
            "tick 1.200\n"
            "end\n");
  EXPECT_EQ(heard, (std::vector<double>{1.0, 1.2, 1.2}));
}

TEST(StreamEvents, StatusHearsAheadOfTheModelByTheVadsDelay) {
  Harness h(true);
  h.push_and_step(concat({tone(0.7, 0.1f), silence(0.3)}));
  const StreamStatus st = h.session->status();
  EXPECT_DOUBLE_EQ(st.heard_seconds, 1.0);
  EXPECT_DOUBLE_EQ(st.processed_seconds, 1.0 - 2048.0 / 16000.0);
}

TEST(StreamEvents, TheEndAfterAPauseDecodesNothingAgain) {
  Harness h(true);
  h.push_and_step(concat({tone(0.7, 0.1f), silence(0.5)}));
  const int passes = h.processor->passes();
  const uint64_t before = h.session->events_since(0).next;
  h.end();
  // The end of speech flushed the model: the end of the stream has nothing to decode.
  EXPECT_EQ(h.processor->passes(), passes);
  EXPECT_EQ(describe(h.session->events_since(before).events), "end\n");
}

TEST(StreamEvents, TheEndAfterAFinalizeDecodesNothingAgain) {
  Harness h(false);
  h.push_and_step(tone(0.7, 0.1f));
  h.session->finalize();
  h.session->step();
  const int passes = h.processor->passes();
  h.end();
  EXPECT_EQ(h.processor->passes(), passes);
  // Audio after the flush is decoded at the end as before.
  Harness g(false);
  g.push_and_step(tone(0.7, 0.1f));
  g.session->finalize();
  g.session->step();
  g.push_and_step(tone(0.3, 0.2f));
  const int before_end = g.processor->passes();
  g.end();
  EXPECT_EQ(g.processor->passes(), before_end + 1);
}

}  // namespace
}  // namespace earshot::session

#include "session/stream_session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <utility>

#include "common/pass_stop.h"
#include "fakes.h"
#include "protocol/wlk/projection.h"

namespace earshot::session {
namespace {

// The fakes and audio builders of fakes.h.
using namespace earshot::testing;

// The lines these tests assert are WhisperLiveKit's projection of the session's events.
using protocol::wlk::format_protocol_time;
using protocol::wlk::Line;
using protocol::wlk::Snapshot;
Snapshot snapshot(const StreamSession& session) { return protocol::wlk::snapshot_of(session); }

struct Harness {
  FakeProcessor* processor = nullptr;
  std::unique_ptr<StreamSession> session;
  double now = 100.0;
  explicit Harness(bool with_vad, StreamOptions options = {}) {
    auto p = std::make_unique<FakeProcessor>();
    processor = p.get();
    std::unique_ptr<VoiceActivityDetector> vad;
    if (with_vad) vad = std::make_unique<FakeVad>();
    session = std::make_unique<StreamSession>(std::move(p), std::move(vad), options, [this] { return now; });
  }
  // Pushes in pieces of `piece` samples, stepping whenever the session asks.
  void run(const std::vector<float>& audio, size_t piece, bool step_each_piece = true) {
    for (size_t i = 0; i < audio.size(); i += piece) {
      session->push_audio(std::span<const float>(audio).subspan(i, std::min(piece, audio.size() - i)));
      if (step_each_piece && session->has_work()) session->step();
    }
    session->end_of_stream();
    while (session->has_work()) session->step();
  }
};

std::string describe(const std::vector<Line>& lines) {
  std::string out;
  for (const Line& l : lines) {
    out += std::to_string(l.speaker) + "|" + l.text + "|" + format_protocol_time(l.start) + "|" +
           format_protocol_time(l.end) + "|" + l.detected_language + "\n";
  }
  return out;
}

TEST(StreamSession, WithoutVadEveryWordGoesToOneLine) {
  Harness h(false);
  h.run(concat({tone(1.0, 0.1f), tone(1.2, 0.2f)}), 1600);
  Snapshot snap = snapshot(*h.session);
  EXPECT_TRUE(snap.finished);
  EXPECT_EQ(describe(snap.lines), "1| w100 w100 w200 w200 p200|0:00:00.00|0:00:02.20|en\n");
  EXPECT_EQ(snap.buffer_transcription, "");
  EXPECT_DOUBLE_EQ(snap.received_seconds, 2.2);
  EXPECT_DOUBLE_EQ(snap.processed_seconds, 2.2);
  EXPECT_EQ(snap.lag_transcription(), 0);
  EXPECT_EQ(snap.lag_processing(), 0);
}

TEST(StreamSession, ProvisionalTailIsTheBuffer) {
  Harness h(false);
  h.session->push_audio(tone(0.7, 0.1f));
  ASSERT_TRUE(h.session->has_work());
  h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_EQ(describe(snap.lines), "1| w100|0:00:00.00|0:00:00.50|en\n");
  EXPECT_EQ(snap.buffer_transcription, " ~");
  EXPECT_FALSE(snap.finished);
  // Wall clock 3 s after the first audio, transcribed (incl. provisional) up to 0.7 s.
  h.now += 3.0;
  snap = snapshot(*h.session);
  EXPECT_DOUBLE_EQ(snap.lag_transcription(), 2.3);
  EXPECT_DOUBLE_EQ(snap.lag_processing(), 0.0);
  EXPECT_DOUBLE_EQ(snap.lag_policy(), 0.2);
  h.session->push_audio(tone(0.3, 0.1f));
  snap = snapshot(*h.session);
  EXPECT_DOUBLE_EQ(snap.lag_processing(), 0.3);
}

TEST(StreamSession, ResultsDoNotDependOnChunkingOrStepping) {
  std::vector<float> audio = concat(
      {tone(1.3, 0.1f), silence(0.4), tone(0.9, 0.25f), silence(6.0), tone(2.1, 0.05f), silence(1.0), tone(0.6, 0.3f)});
  for (bool vad : {false, true}) {
    Harness reference(vad);
    reference.run(audio, audio.size());
    std::string expected = describe(snapshot(*reference.session).lines);
    std::mt19937 rng(7);
    for (size_t piece : {1u, 160u, 512u, 1600u, 4001u, 16000u}) {
      Harness h(vad);
      h.run(audio, piece, rng() % 2 == 0);
      EXPECT_EQ(describe(snapshot(*h.session).lines), expected) << "vad=" << vad << " piece=" << piece;
    }
  }
}

TEST(StreamSession, LongPauseMakesSilenceLineAndNewLine) {
  Harness h(true);
  h.run(concat({tone(1.0, 0.1f), silence(6.0), tone(1.0, 0.3f)}), 1600);
  // Speech ends with the last 512-sample window holding tone (16384 = 1.024 s);
  // it resumes at the window holding the tone's start (111616 = 6.976 s).
  EXPECT_EQ(describe(snapshot(*h.session).lines),
            "1| w100 w100|0:00:00.00|0:00:01.00|en\n"
            "-2||0:00:01.02|0:00:06.98|\n"
            "1| w286 w300|0:00:06.98|0:00:07.98|en\n");
  ASSERT_EQ(h.processor->silences_.size(), 2u);
  EXPECT_DOUBLE_EQ(h.processor->silences_[0].first, 0.0);  // speech from the very first sample
  EXPECT_NEAR(h.processor->silences_[1].first, 6.976 - 1.024, 1e-9);
  EXPECT_NEAR(h.processor->silences_[1].second, 6.976, 1e-9);
}

TEST(StreamSession, ShortPauseKeepsTheLine) {
  Harness h(true);
  h.run(concat({tone(1.0, 0.1f), silence(2.0), tone(1.0, 0.3f)}), 3200);
  EXPECT_EQ(describe(snapshot(*h.session).lines), "1| w100 w100 w286 w300|0:00:00.00|0:00:03.98|en\n");
}

TEST(StreamSession, OngoingLongPauseShowsAsSilenceLineAndEndsTheStream) {
  Harness h(true);
  h.session->push_audio(concat({tone(1.0, 0.1f), silence(4.0)}));
  h.session->step();
  EXPECT_EQ(describe(snapshot(*h.session).lines), "1| w100 w100|0:00:00.00|0:00:01.00|en\n");
  h.session->push_audio(silence(3.0));
  h.session->step();
  // Decided up to 8 s minus the VAD's decision delay (2048 samples).
  EXPECT_EQ(describe(snapshot(*h.session).lines),
            "1| w100 w100|0:00:00.00|0:00:01.00|en\n-2||0:00:01.02|0:00:07.87|\n");
  EXPECT_EQ(snapshot(*h.session).lag_policy(), 0);  // a pause is nothing left to transcribe
  h.session->end_of_stream();
  h.session->step();
  EXPECT_EQ(describe(snapshot(*h.session).lines),
            "1| w100 w100|0:00:00.00|0:00:01.00|en\n-2||0:00:01.02|0:00:08.00|\n");
  EXPECT_TRUE(snapshot(*h.session).finished);
}

TEST(StreamSession, LeadingSilenceIsNotSentToTheModel) {
  Harness h(true);
  h.run(concat({silence(2.0), tone(1.0, 0.2f)}), 1600);
  // Speech starts at the window holding sample 32000 (window 62 starts at 31744).
  EXPECT_EQ(describe(snapshot(*h.session).lines), "1| w194 w200|0:00:01.98|0:00:02.98|en\n");
  EXPECT_EQ(h.processor->inserted(), 48000u - 31744u);
}

TEST(StreamSession, FallingBehindMeansBiggerStepsNotMorePasses) {
  StreamOptions options;
  options.max_step_seconds = 10;
  Harness h(false, options);
  std::vector<float> audio = tone(4.0, 0.1f);
  for (size_t i = 0; i < audio.size(); i += 1600) h.session->push_audio(std::span<const float>(audio).subspan(i, 1600));
  h.session->step();  // 40 pieces waiting: one pass over all of them
  EXPECT_EQ(h.processor->passes(), 1);
  EXPECT_EQ(h.processor->inserted(), audio.size());
  EXPECT_FALSE(h.session->has_work());
}

TEST(StreamSession, StepSizeIsCapped) {
  StreamOptions options;
  options.max_step_seconds = 1.5;
  Harness h(false, options);
  h.session->push_audio(tone(4.0, 0.1f));
  h.session->step();
  EXPECT_EQ(h.processor->inserted(), 24000u);
  EXPECT_TRUE(h.session->has_work());
  EXPECT_DOUBLE_EQ(snapshot(*h.session).lag_processing(), 2.5);
}

// A client paced in real time (a second of audio per second) whose session does not
// keep up: the oldest waiting audio is skipped, announced, and shown as a skipped line.
TEST(StreamSession, WaitingAudioOfARealTimeClientIsBoundedBySkippingTheOldest) {
  StreamOptions options;
  options.max_pending_seconds = 1.0;
  Harness h(false, options);
  for (float amplitude : {0.1f, 0.2f, 0.3f}) {
    h.session->push_audio(tone(1.0, amplitude));
    EXPECT_TRUE(h.session->accepting_audio());  // never held back: it is skipped instead
    h.now += 1.0;
  }
  h.session->end_of_stream();
  while (h.session->has_work()) h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_FALSE(snap.sender_ahead);
  EXPECT_DOUBLE_EQ(snap.skipped_seconds, 2.0);
  EXPECT_DOUBLE_EQ(snap.received_seconds, 3.0);
  // Only the newest second reached the model, at its true stream time; the skipped
  // span is a silence line marked as skipped.
  EXPECT_EQ(describe(snap.lines), "-2||0:00:00.00|0:00:02.00|\n1| w300 w300|0:00:02.00|0:00:03.00|en\n");
  ASSERT_EQ(snap.lines.size(), 2u);
  EXPECT_TRUE(snap.lines[0].skipped);
  EXPECT_EQ(h.processor->inserted(), 16000u);
  bool announced = false;
  for (const events::Event& e : h.session->events_since(0).events)
    if (const auto* skip = std::get_if<events::AudioSkipped>(&e)) {
      EXPECT_DOUBLE_EQ(skip->start, 0.0);
      EXPECT_DOUBLE_EQ(skip->end, 2.0);
      announced = true;
    }
  EXPECT_TRUE(announced);
}

// A client sending faster than real time (a file streamed as fast as it can) is held
// back at the limit instead: the transport stops reading while accepting_audio() is
// false, and every word of the stream comes out, as from the same audio pushed whole.
TEST(StreamSession, AClientAheadOfRealTimeIsHeldBackAndLosesNothing) {
  StreamOptions options;
  options.max_pending_seconds = 4.0;
  options.max_step_seconds = 1.0;
  Harness h(false, options);
  std::vector<float> audio;
  for (int i = 0; i < 24; ++i) {
    std::vector<float> part = tone(0.5, 0.05f + 0.01f * static_cast<float>(i));
    audio.insert(audio.end(), part.begin(), part.end());
  }
  const size_t piece = 8000;
  int held_back = 0;
  for (size_t i = 0; i < audio.size();) {
    if (!h.session->accepting_audio()) {  // the transport would stop reading here
      ++held_back;
      h.session->step();
      continue;
    }
    h.session->push_audio(std::span<const float>(audio).subspan(i, piece));
    i += piece;
  }
  h.session->end_of_stream();
  while (h.session->has_work()) h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_TRUE(snap.sender_ahead);
  EXPECT_GT(held_back, 0);
  EXPECT_DOUBLE_EQ(snap.skipped_seconds, 0.0);
  Harness whole(false);
  whole.run(audio, audio.size());
  EXPECT_EQ(describe(snap.lines), describe(snapshot(*whole.session).lines));
  for (const events::Event& e : h.session->events_since(0).events)
    EXPECT_FALSE(std::holds_alternative<events::AudioSkipped>(e));
}

// Backpressure is a request to the transport: one that reads on regardless still
// cannot grow the waiting audio past twice the limit (the excess is skipped, announced).
TEST(StreamSession, AHeldBackClientThatIsReadAnywayIsBoundedAtTwiceTheLimit) {
  StreamOptions options;
  options.max_pending_seconds = 3.0;
  Harness h(false, options);
  for (int i = 0; i < 10; ++i) h.session->push_audio(tone(1.0, 0.1f));
  EXPECT_FALSE(h.session->accepting_audio());
  h.session->end_of_stream();
  EXPECT_TRUE(h.session->accepting_audio());  // nothing more will be read: no reason to hold
  while (h.session->has_work()) h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_DOUBLE_EQ(snap.skipped_seconds, 4.0);
  EXPECT_EQ(h.processor->inserted(), 6u * 16000u);
}

// halt(): the server gives up on the stream; no step runs after it.
TEST(StreamSession, NoStepRunsAfterHalt) {
  Harness h(false);
  h.session->push_audio(tone(1.0, 0.1f));
  EXPECT_TRUE(h.session->has_work());
  EXPECT_FALSE(h.session->stepping());
  h.session->halt();
  EXPECT_FALSE(h.session->has_work());
  h.session->step();
  EXPECT_EQ(h.processor->passes(), 0);
  EXPECT_FALSE(h.session->stepping());
}

TEST(StreamSession, ModelFailureEndsTheSessionWithAnError) {
  Harness h(false);
  h.session->push_audio(std::vector<float>(8000, 0.5f));
  h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_EQ(snap.error, "fake model refuses a window of constant 0.5");
  EXPECT_TRUE(h.session->done());
  EXPECT_FALSE(h.session->has_work());
  h.session->push_audio(tone(1.0, 0.1f));  // ignored after failure
  EXPECT_FALSE(h.session->has_work());
}

TEST(StreamSession, FailFromOutsideStopsWork) {
  Harness h(false);
  h.session->push_audio(tone(1.0, 0.1f));
  h.session->fail("invalid audio: not a webm stream");
  EXPECT_FALSE(h.session->has_work());
  EXPECT_EQ(snapshot(*h.session).error, "invalid audio: not a webm stream");
}

TEST(StreamSession, EmptyStreamFinishesWithNoLines) {
  Harness h(true);
  h.session->end_of_stream();
  ASSERT_TRUE(h.session->has_work());
  h.session->step();
  Snapshot snap = snapshot(*h.session);
  EXPECT_TRUE(snap.finished);
  EXPECT_TRUE(snap.lines.empty());
}

// A VAD that cannot tell an end is coming (the interface's default).
class FakeVadWithoutPendingEnds : public FakeVad {
 public:
  bool end_pending() const override { return false; }
};

// While the VAD has an end pending, a step runs the VAD alone and lets the
// processor work out its flush ahead (prepare_flush): a pass now would only delay
// the flush. Steps come every VAD window then, the flush with the decision; the
// words are the same as with every pass run.
TEST(StreamSession, WhileAnEndIsPendingStepsRunNoPassAndTheFlushFollowsTheDecision) {
  auto run = [](std::unique_ptr<VoiceActivityDetector> vad, bool tells_pending_ends, std::vector<int>& passes,
                std::vector<int>& prepared) {
    auto p = std::make_unique<FakeProcessor>();
    FakeProcessor* processor = p.get();
    StreamSession session(std::move(p), std::move(vad), {});
    session.push_audio(tone(0.992, 0.1f));  // 31 whole windows of speech
    session.step();
    passes.push_back(processor->passes());
    prepared.push_back(processor->prepared());
    session.push_audio(silence(0.064));  // two silent windows: the end is pending
    session.step();
    passes.push_back(processor->passes());
    prepared.push_back(processor->prepared());
    EXPECT_FALSE(session.has_work());    // nothing new to step over yet
    session.push_audio(silence(0.032));  // the third: decided
    // One VAD window is a step while an end is pending (else it waits for min_step_seconds).
    EXPECT_EQ(session.has_work(), tells_pending_ends);
    session.step();
    passes.push_back(processor->passes());
    EXPECT_FALSE(session.urgent());
    session.end_of_stream();
    while (session.has_work()) session.step();
    return describe(snapshot(session).lines);
  };
  std::vector<int> with, without, prepared_with, prepared_without;
  const std::string lines = run(std::make_unique<FakeVad>(), true, with, prepared_with);
  EXPECT_EQ(with, (std::vector<int>{1, 1, 2}));        // the pending step ran no pass; the decision flushed
  EXPECT_EQ(prepared_with, (std::vector<int>{0, 1}));  // it prepared the flush
  EXPECT_EQ(run(std::make_unique<FakeVadWithoutPendingEnds>(), false, without, prepared_without), lines);
  EXPECT_EQ(without, (std::vector<int>{1, 2, 3}));  // a pass on every step
  EXPECT_EQ(prepared_without, (std::vector<int>{0, 0}));
  EXPECT_NE(lines.find(" p100"), std::string::npos) << lines;  // the flush's partial window
}

// A processor whose regular passes run as stoppable graphs (common/pass_stop.h):
// before its work, `during` plays the audio that arrives while the pass runs,
// then the pass asks its listener once, as a graph does between nodes.
class StoppableProcessor : public FakeProcessor {
 public:
  std::function<void()> during;
  int stopped = 0;
  ProcessResult process(bool is_last) override {
    if (!is_last) {
      StoppablePass stoppable;
      if (during) std::exchange(during, nullptr)();
      if (const std::function<bool()>* listener = pass_stop_listener();
          listener && pass_listener_says_stop(*listener)) {
        ++stopped;
        throw PassStopped();
      }
    }
    return FakeProcessor::process(is_last);
  }
};

// Speech ends while a pass is in flight: the VAD hears the silence that arrived
// meanwhile, the pass stops (its audio waits for the flush), the next step
// prepares the flush and the decision flushes. Nothing is lost: the words are
// those of a session whose pass ran to its end.
TEST(StreamSession, APassInFlightStopsWhenTheSpeechEndsAndItsAudioGoesToTheFlush) {
  auto run = [](bool stoppable, SessionStats& stats, int& stopped, int& prepared) {
    auto p = std::make_unique<StoppableProcessor>();
    StoppableProcessor* processor = p.get();
    StreamSession session(std::move(p), std::make_unique<FakeVad>(), {});
    session.push_audio(tone(0.992, 0.1f));  // 31 whole windows of speech
    session.step();
    session.push_audio(tone(0.704, 0.2f));  // more speech: a pass
    // Two silent windows (an end pending) arrive while that pass runs, or after it.
    auto pause = [&] { session.push_audio(silence(0.064)); };
    if (stoppable) processor->during = pause;
    session.step();
    if (!stoppable) pause();
    session.step();                      // the end pending: the flush prepared
    session.push_audio(silence(0.032));  // the third silent window: decided
    session.step();                      // the flush
    while (session.has_work()) session.step();
    session.end_of_stream();
    while (session.has_work()) session.step();
    stats = session.stats();
    stopped = processor->stopped;
    prepared = processor->prepared();
    return describe(snapshot(session).lines);
  };
  SessionStats stopped_stats, plain_stats;
  int stopped = 0, prepared = 0, plain_stopped = 0, plain_prepared = 0;
  const std::string lines = run(true, stopped_stats, stopped, prepared);
  EXPECT_EQ(stopped, 1);
  EXPECT_EQ(stopped_stats.stopped_passes, 1u);
  EXPECT_EQ(prepared, 1);  // the step after the stop worked out the flush
  const std::string plain = run(false, plain_stats, plain_stopped, plain_prepared);
  EXPECT_EQ(plain_stopped, 0);
  EXPECT_EQ(plain_stats.stopped_passes, 0u);
  EXPECT_EQ(plain_prepared, 1);
  EXPECT_EQ(stopped_stats.passes + 1, plain_stats.passes);  // the stopped pass is no pass
  EXPECT_EQ(lines, plain);
  EXPECT_NE(lines.find(" w"), std::string::npos) << lines;
  EXPECT_NE(lines.find(" p"), std::string::npos) << lines;  // the flush's partial window
}

// Audio a pass's listener heard, which the session then skipped (a real-time
// client fallen behind), is not skipped a second time on the VAD's clock: its
// events keep their stream times.
TEST(StreamSession, AudioHeardDuringAPassThenSkippedKeepsTheVadOnTheStreamClock) {
  StreamOptions options;
  options.max_pending_seconds = 1.0;
  double now = 100.0;
  auto p = std::make_unique<StoppableProcessor>();
  StoppableProcessor* processor = p.get();
  StreamSession session(std::move(p), std::make_unique<FakeVad>(), options, [&] { return now; });
  session.push_audio(tone(0.992, 0.1f));
  now += 1.0;
  session.step();
  session.push_audio(tone(0.512, 0.1f));
  processor->during = [&] { session.push_audio(tone(0.512, 0.1f)); };  // heard by the pass's listener
  session.step();
  EXPECT_EQ(processor->stopped, 0);  // the speech goes on
  now += 1.0;
  session.push_audio(silence(1.0));  // 1.512 s waiting: the oldest 0.512 s (heard) is skipped
  while (session.has_work()) session.step();
  session.end_of_stream();
  while (session.has_work()) session.step();
  std::vector<double> ends;
  bool skipped = false;
  for (const events::Event& e : session.events_since(0).events) {
    if (const auto* skip = std::get_if<events::AudioSkipped>(&e)) {
      EXPECT_DOUBLE_EQ(skip->start, 1.504);
      EXPECT_DOUBLE_EQ(skip->end, 2.016);
      skipped = true;
    }
    if (const auto* end = std::get_if<events::SpeechEnded>(&e)) ends.push_back(end->at);
  }
  EXPECT_TRUE(skipped);
  // The gap ends the speech before it; the VAD ends it after it where the heard tone ended.
  EXPECT_EQ(ends, (std::vector<double>{1.504, 2.016}));
}

// A pass goes on while the speech goes on: silence that ends no speech (before
// any) or a VAD-less session never stops it.
TEST(StreamSession, APassInFlightGoesOnWhileTheSpeechGoesOn) {
  auto p = std::make_unique<StoppableProcessor>();
  StoppableProcessor* processor = p.get();
  StreamSession session(std::move(p), std::make_unique<FakeVad>(), {});
  session.push_audio(tone(0.992, 0.1f));
  session.step();
  session.push_audio(tone(0.512, 0.1f));
  processor->during = [&] { session.push_audio(tone(0.5, 0.1f)); };  // more speech arrives meanwhile
  session.step();
  EXPECT_EQ(processor->stopped, 0);
  EXPECT_EQ(session.stats().stopped_passes, 0u);

  auto q = std::make_unique<StoppableProcessor>();
  StoppableProcessor* without_vad = q.get();
  StreamSession plain(std::move(q), nullptr, {});
  plain.push_audio(tone(0.992, 0.1f));
  without_vad->during = [&] { plain.push_audio(silence(0.5)); };
  plain.step();
  EXPECT_EQ(without_vad->stopped, 0);
}

TEST(StreamSession, UrgentWhileAnEndIsPendingOrAFinalizeWaits) {
  Harness h(true);
  EXPECT_FALSE(h.session->urgent());
  h.session->push_audio(tone(0.992, 0.1f));
  h.session->step();
  EXPECT_FALSE(h.session->urgent());
  h.session->push_audio(silence(0.032));
  h.session->step();
  EXPECT_TRUE(h.session->urgent());  // one silent window
  h.session->push_audio(tone(1.1, 0.1f));
  EXPECT_FALSE(h.session->urgent());  // over a second waiting: no live turn about to end
  h.session->step();                  // the speech came back
  EXPECT_FALSE(h.session->urgent());
  h.session->finalize();
  EXPECT_TRUE(h.session->urgent());
  h.session->step();
  EXPECT_FALSE(h.session->urgent());
  h.session->end_of_stream();
  EXPECT_FALSE(h.session->urgent());  // the end of a stream is no turn to hurry
}

}  // namespace
}  // namespace earshot::session

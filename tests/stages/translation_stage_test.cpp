#include "stages/translation/translation_stage.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "../session/fakes.h"
#include "../support/wait.h"
#include "fake_llm.h"
#include "session/stream_session.h"

namespace earshot::stages::translation {
namespace {

using earshot::testing::FakeModel;
using earshot::testing::word_for_word;

Word word(const std::string& text, double start, double end) { return Word{text, start, end, -1, "en", -1}; }

CalibrationRegistry registry() {
  CalibrationRegistry r;
  r.add({"hy-mt2-1.8b", "en", "de", {{9, 5}, {13, 1}}, {}});
  return r;
}

TranslationOptions options() {
  TranslationOptions o;
  o.target_language = "de";
  o.commit.mode = CommitMode::kArgmax;
  o.redraft_source_tokens = 1;
  return o;
}

struct Collected {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<events::Event> events;
  void add(std::vector<events::Event> more) {
    std::lock_guard lock(mutex);
    for (auto& e : more) events.push_back(std::move(e));
    changed.notify_all();
  }
  bool wait_for_end(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex);
    return changed.wait_for(
        lock, timeout, [&] { return !events.empty() && std::holds_alternative<events::EndOfStream>(events.back()); });
  }
};

TEST(TranslationStage, SynchronousStageDraftsCommitsAndFinalises) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  TranslationService service(model, registry(), 1, options());
  auto stage = service.make_synchronous_stage("en", options());
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  stage->consume(events::WordsCommitted{{word("alpha", 0, 1), word(" beta", 1, 2)}}, emit);
  stage->consume(events::ProvisionalChanged{{word(" gamma", 2, 3)}}, emit);
  stage->consume(events::WordsCommitted{{word(" gamma.", 2, 4.5)}}, emit);
  stage->consume(events::EndOfStream{}, emit);
  ASSERT_EQ(out.size(), 7u);
  EXPECT_TRUE(std::holds_alternative<events::WordsCommitted>(out[0]));
  const auto* c = std::get_if<events::TranslationCommitted>(&out[1]);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->text, "ALPHA BETA");
  EXPECT_EQ(c->segment, 0);
  EXPECT_TRUE(std::holds_alternative<events::ProvisionalChanged>(out[2]));
  const auto* d = std::get_if<events::TranslationDraftChanged>(&out[3]);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, " GAMMA");
  EXPECT_TRUE(std::holds_alternative<events::WordsCommitted>(out[4]));
  const auto* f = std::get_if<events::SegmentTranslated>(&out[5]);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->segment, 0);
  EXPECT_EQ(f->source, "alpha beta gamma.");
  EXPECT_EQ(f->translation, "ALPHA BETA GAMMA.");
  EXPECT_DOUBLE_EQ(f->start, 0);
  EXPECT_DOUBLE_EQ(f->end, 4.5);
  EXPECT_TRUE(std::holds_alternative<events::EndOfStream>(out[6]));
}

TEST(TranslationStage, WithoutACalibrationOnlyFinalsComeAndAWarningSaysWhy) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  TranslationService service(model, CalibrationRegistry{}, 1, options());
  std::vector<std::string> warnings;
  service.set_warning_sink([&](const std::string& m) { warnings.push_back(m); });
  auto stage = service.make_synchronous_stage("en", options());
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  stage->consume(events::WordsCommitted{{word("alpha", 0, 1)}}, emit);
  stage->consume(events::EndOfStream{}, emit);
  ASSERT_EQ(out.size(), 3u);
  const auto* f = std::get_if<events::SegmentTranslated>(&out[1]);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->translation, "ALPHA");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("simultaneous mode off (no calibration for hy-mt2-1.8b en->de)"), std::string::npos);
}

TEST(TranslationStage, ACalibrationThatDoesNotFitTheModelFallsBackToFinals) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  CalibrationRegistry r;
  r.add({"hy-mt2-1.8b", "en", "de", {{40, 0}}, {}});  // the model has 32 layers
  TranslationService service(model, r, 1, options());
  std::vector<std::string> warnings;
  service.set_warning_sink([&](const std::string& m) { warnings.push_back(m); });
  auto stage = service.make_synchronous_stage("en", options());
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  stage->consume(events::WordsCommitted{{word("alpha", 0, 1)}}, emit);
  stage->consume(events::WordsCommitted{{word(" beta", 1, 2)}}, emit);
  stage->consume(events::EndOfStream{}, emit);
  ASSERT_EQ(out.size(), 4u);
  const auto* f = std::get_if<events::SegmentTranslated>(&out[2]);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->translation, "ALPHA BETA");
  ASSERT_EQ(warnings.size(), 1u);  // once, not per job
  EXPECT_NE(warnings[0].find("(40,0) does not exist"), std::string::npos) << warnings[0];
}

TEST(TranslationStage, ASlowModelNeverBlocksTheSessionThreadAndSkipsOnlyDrafts) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open = false;
  model->on_decode = [&] {
    std::unique_lock lock(gate_mutex);
    gate_cv.wait(lock, [&] { return open; });
  };
  TranslationService service(model, registry(), 1, options());
  auto stage = service.make_stage("en", options());
  Collected posted;
  stage->attach([&](std::vector<events::Event> e) { posted.add(std::move(e)); });
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) { out.push_back(std::move(e)); };
  std::string source;
  // 30 commits while the model is stuck: every consume() returns at once (a
  // blocking stage would hang here until the test times out).
  for (int i = 0; i < 30; ++i) {
    const std::string text = (i ? " w" : "w") + std::to_string(i);
    source += text;
    stage->consume(events::WordsCommitted{{word(text, i * 0.1, i * 0.1 + 0.1)}}, emit);
  }
  stage->consume(events::EndOfStream{}, emit);
  ASSERT_EQ(out.size(), 30u);  // the words, forwarded; the end of the stream is held back
  for (const auto& e : out) EXPECT_TRUE(std::holds_alternative<events::WordsCommitted>(e));
  {
    std::lock_guard lock(gate_mutex);
    open = true;
  }
  gate_cv.notify_all();
  ASSERT_TRUE(posted.wait_for_end(std::chrono::seconds(30)));
  std::lock_guard lock(posted.mutex);
  ASSERT_GE(posted.events.size(), 2u);
  const auto* f = std::get_if<events::SegmentTranslated>(&posted.events[posted.events.size() - 2]);
  ASSERT_TRUE(f);  // the final, never skipped, just before the end
  EXPECT_EQ(f->source, source);
  EXPECT_EQ(f->translation, earshot::testing::upper(source));
  // At most the first draft, the newest waiting one and the final reached the
  // model (the final may reuse the draft's whole prompt from the KV cache).
  EXPECT_LE(model->prompt_decodes, 3);
}

TEST(TranslationStage, DraftsOfASegmentWhoseFinalIsQueuedAreSkipped) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool open = false;
  int entered = 0;
  model->on_decode = [&] {
    std::unique_lock lock(gate_mutex);
    ++entered;
    gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return open; });
  };
  TranslationService service(model, registry(), 1, options());
  auto stage = service.make_stage("en", options());
  Collected posted;
  stage->attach([&](std::vector<events::Event> e) { posted.add(std::move(e)); });
  auto ignore = [](events::Event) {};
  // The first draft reaches the (stuck) model; three more wait, each replacing
  // the one before; the segment's final then replaces the last.
  for (int i = 0; i < 4; ++i) {
    stage->consume(events::WordsCommitted{{word((i ? " w" : "w") + std::to_string(i), i * 0.1, i * 0.1 + 0.1)}},
                   ignore);
    if (i == 0) {  // the first draft is in the model before the others arrive
      std::unique_lock lock(gate_mutex);
      gate_cv.wait(lock, [&] { return entered > 0; });
    }
  }
  stage->consume(events::Finalized{}, ignore);
  stage->consume(events::EndOfStream{}, ignore);
  {
    std::lock_guard lock(gate_mutex);
    open = true;
  }
  gate_cv.notify_all();
  ASSERT_TRUE(posted.wait_for_end(std::chrono::seconds(30)));
  const TranslationCounts c = service.counts();
  EXPECT_EQ(c.draft_calls, 1);
  EXPECT_EQ(c.final_calls, 1);
  EXPECT_EQ(c.skipped_drafts, 3);
}

TEST(TranslationStage, SessionsShareTheModelWithTheirOwnState) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  TranslationService service(model, registry(), 2, options());
  constexpr int kStreams = 4;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<std::unique_ptr<Collected>> posted;
  for (int s = 0; s < kStreams; ++s) {
    stages.push_back(service.make_stage("en", options()));
    posted.push_back(std::make_unique<Collected>());
    stages.back()->attach([p = posted.back().get()](std::vector<events::Event> e) { p->add(std::move(e)); });
  }
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s)
    threads.emplace_back([&, s] {
      auto emit = [](events::Event) {};
      for (int i = 0; i < 12; ++i)
        stages[s]->consume(
            events::WordsCommitted{{word(" s" + std::to_string(s) + "x" + std::to_string(i), i, i + 0.5)}}, emit);
      stages[s]->consume(events::EndOfStream{}, emit);
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < kStreams; ++s) {
    ASSERT_TRUE(posted[s]->wait_for_end(std::chrono::seconds(30)));
    std::string committed, finals;
    for (const auto& e : posted[s]->events) {
      if (const auto* c = std::get_if<events::TranslationCommitted>(&e)) committed += c->text;
      if (const auto* f = std::get_if<events::SegmentTranslated>(&e)) finals += f->translation + "|";
    }
    // Segments close at the 4 s soft maximum? No punctuation: at the 20 s hard
    // maximum never reached; the end of the stream closes the only segment.
    std::string expected;
    for (int i = 0; i < 12; ++i) expected += (i ? " S" : "S") + std::to_string(s) + "X" + std::to_string(i);
    EXPECT_EQ(finals, expected + "|") << s;
    EXPECT_TRUE(expected.starts_with(committed)) << s << ": " << committed;
  }
}

// A re-draft's stage on a pool: what the cached draft already covers of the
// newly committed source (the tail it drafted) is committed and posted before
// the re-draft's model call (TranslationOptions::release_first); off, the
// commit comes only with the call's result. Deterministic: the second draft's
// decode waits at a gate, and the test looks at what was posted once it is
// there.
TEST(TranslationStage, AReDraftFirstReleasesWhatTheLastDraftCovered) {
  for (const bool release_first : {true, false}) {
    SCOPED_TRACE(release_first ? "release first" : "after the call");
    auto model = std::make_shared<FakeModel>(word_for_word(2));
    std::mutex gate_mutex;
    std::condition_variable gate_cv;
    bool hold = false, open = false;
    int waiting = 0;
    model->on_decode = [&] {
      std::unique_lock lock(gate_mutex);
      if (!hold) return;
      ++waiting;
      gate_cv.notify_all();
      gate_cv.wait(lock, [&] { return open; });
    };
    TranslationOptions o = options();
    o.release_first = release_first;
    TranslationService service(model, registry(), 1, o);
    auto stage = service.make_stage("en", o);
    Collected posted;
    stage->attach([&](std::vector<events::Event> e) { posted.add(std::move(e)); });
    auto ignore = [](events::Event) {};
    auto committed = [&] {
      std::lock_guard lock(posted.mutex);
      std::string text;
      for (const auto& e : posted.events)
        if (const auto* c = std::get_if<events::TranslationCommitted>(&e)) text += c->text;
      return text;
    };
    // The first draft: "the meeting" committed, " starts at" its tail.
    stage->consume(events::WordsCommitted{{word("the", 0, 0.2), word(" meeting", 0.2, 0.5)}}, ignore);
    stage->consume(events::ProvisionalChanged{{word(" starts", 0.5, 0.8), word(" at", 0.8, 1.0)}}, ignore);
    service.wait_idle();
    ASSERT_EQ(committed(), "THE MEETING");
    // The tail and one more word committed: a re-draft, held in the model.
    {
      std::lock_guard lock(gate_mutex);
      hold = true;
    }
    stage->consume(events::WordsCommitted{{word(" starts", 0.5, 0.8), word(" at", 0.8, 1.0), word(" nine", 1.0, 1.3)}},
                   ignore);
    {
      std::unique_lock lock(gate_mutex);
      ASSERT_TRUE(gate_cv.wait_for(lock, std::chrono::seconds(30), [&] { return waiting > 0; }));
    }
    EXPECT_EQ(committed(), release_first ? "THE MEETING STARTS AT" : "THE MEETING");
    {
      std::lock_guard lock(gate_mutex);
      open = true;
    }
    gate_cv.notify_all();
    service.wait_idle();
    EXPECT_EQ(committed(), "THE MEETING STARTS AT NINE");
  }
}

TEST(TranslationStage, InASessionTheLogEndsAfterTheLastFinal) {
  auto model = std::make_shared<FakeModel>(word_for_word(2));
  TranslationService service(model, registry(), 1, options());
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(service.make_stage("en", options()));
  session::StreamSession session(std::make_unique<earshot::testing::FakeProcessor>(), nullptr, {}, {},
                                 std::move(stages));
  std::vector<float> audio(16000 * 2, 0.2f);
  session.push_audio(audio);
  session.end_of_stream();
  while (session.has_work()) session.step();
  ASSERT_TRUE(earshot::testing::eventually([&] { return session.done(); })) << "the session never finished";
  session::EventBatch batch = session.events_since(0);
  EXPECT_TRUE(batch.status.finished);
  ASSERT_GE(batch.events.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<events::EndOfStream>(batch.events.back()));
  const auto* f = std::get_if<events::SegmentTranslated>(&batch.events[batch.events.size() - 2]);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->source, "w200 w200 w200 w200");
  EXPECT_EQ(f->translation, "W200 W200 W200 W200");
}

}  // namespace
}  // namespace earshot::stages::translation

// RevisingProcessor over a scripted re-decoding backend: passes every
// pass_interval of new audio, commits through the commit layer, finalises a
// segment at the end, on a pause or past max_segment_sec, never showing text twice.
#include "policy/commit/revising_processor.h"

#include <gtest/gtest.h>

#include <deque>
#include <tuple>

#include "common/error.h"

namespace earshot::policy::commit {
namespace {

struct ScriptedWindow : WindowDecoder {
  std::deque<WindowPass> script;
  int resets = 0;
  std::vector<WindowRequest> requests;  // what each pass was asked (audio span not kept)
  std::vector<size_t> samples;
  WindowPass decode(const WindowRequest& r) override {
    requests.push_back(r);
    requests.back().audio = {};
    samples.push_back(r.audio.size());
    if (script.empty()) return {};
    WindowPass p = script.front();
    script.pop_front();
    return p;
  }
  void reset() override { ++resets; }
};

// A default config with one change.
template <class F>
RevisingConfig config(F change) {
  RevisingConfig c;
  change(c);
  return c;
}

WindowPass pass(std::string text, std::string language = "") {
  WindowPass p;
  p.hypothesis.text = std::move(text);
  p.language = std::move(language);
  return p;
}

// A pass with timed words (seconds from the segment's start), as a transducer gives them.
WindowPass timed_pass(const std::vector<std::tuple<std::string, double, double>>& words) {
  WindowPass p;
  for (const auto& [text, start, end] : words) {
    Word w;
    w.text = text;
    w.start = start;
    w.end = end;
    p.words.push_back(w);
    p.hypothesis.text += text;
  }
  return p;
}

struct Revising : ::testing::Test {
  ScriptedWindow* fake = nullptr;
  double t = 0;
  std::unique_ptr<RevisingProcessor> make(std::vector<WindowPass> passes, RevisingConfig config = {}) {
    auto d = std::make_unique<ScriptedWindow>();
    d->script.assign(passes.begin(), passes.end());
    fake = d.get();
    return std::make_unique<RevisingProcessor>(std::move(d), config);
  }
  void feed(RevisingProcessor& p, double sec) {
    const std::vector<float> pcm(static_cast<size_t>(sec * 16000), 0.01f);
    t += sec;
    p.insert_audio(pcm, t);
  }
  static std::string join(const std::vector<Word>& words) {
    std::string s;
    for (const auto& w : words) s += w.text;
    return s;
  }
};

TEST_F(Revising, PassesEveryIntervalAndCommitsWhatPassesAgreeOn) {
  RevisingConfig cfg;
  cfg.commit = {.hold_back = 1, .agreeing_passes = 2};
  auto p = make({pass("one two"), pass("one two three four"), pass("one two three four five six")}, cfg);
  feed(*p, 1.0);
  EXPECT_TRUE(p->process().committed.empty());
  EXPECT_TRUE(fake->requests.empty());  // under pass_interval (2 s) of new audio
  feed(*p, 1.0);
  EXPECT_TRUE(p->process().committed.empty());
  EXPECT_EQ(join(p->provisional()), "one two");
  feed(*p, 1.0);
  EXPECT_EQ(fake->requests.size(), 1u);
  p->process();
  EXPECT_EQ(fake->requests.size(), 1u);  // 1 s since the last pass
  feed(*p, 1.0);
  const auto r = p->process();
  ASSERT_EQ(r.committed.size(), 2u);
  EXPECT_EQ(join(r.committed), "one two");
  // No alignment: times are proportional to the position in the 4 s hypothesis.
  EXPECT_DOUBLE_EQ(r.committed[0].start, 0.0);
  EXPECT_NEAR(r.committed[0].end, 4.0 * 3 / 18, 1e-9);
  EXPECT_EQ(fake->requests[1].committed, "");
  EXPECT_EQ(join(p->provisional()), " three four");
  feed(*p, 2.0);
  EXPECT_EQ(join(p->process().committed), " three four");
  EXPECT_EQ(fake->requests[2].committed, "one two");  // a decoder may force it as prefix
}

// Seed regression, end to end: the final pass must not repeat the committed prefix.
TEST_F(Revising, FinishAppendsOnlyTheUncommittedSuffix) {
  RevisingConfig cfg;
  cfg.commit = {.hold_back = 1, .agreeing_passes = 2};
  auto p = make({pass("alpha beta gamma"), pass("alpha beta gamma"), pass("alpha beta gamma delta")}, cfg);
  feed(*p, 2.0);
  p->process();
  feed(*p, 2.0);
  EXPECT_EQ(join(p->process().committed), "alpha beta");
  feed(*p, 0.5);
  const auto r = p->finish();
  EXPECT_EQ(join(r.committed), " gamma delta");
  EXPECT_EQ(join(p->hypothesis()), "alpha beta gamma delta");
  EXPECT_TRUE(p->provisional().empty());
  EXPECT_TRUE(fake->requests.back().is_last);
  EXPECT_EQ(p->corrections(), 0u);
  // Committed times never go backwards.
  const auto all = p->hypothesis();
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i].start, all[i - 1].end);
}

TEST_F(Revising, NoPassOnLessThanTheMinimumAudio) {
  auto p = make({pass("hi")});
  feed(*p, 0.3);
  EXPECT_EQ(join(p->finish().committed), "hi");  // a last pass runs on whatever is buffered
  // An ordinary one waits for min_audio_sec.
  auto q = make({pass("hi")}, config([](auto& c) { c.pass_interval_sec = 0.0; }));
  feed(*q, 0.3);
  q->process();
  EXPECT_TRUE(fake->requests.empty());
  feed(*q, 0.3);
  q->process();
  EXPECT_EQ(fake->requests.size(), 1u);
}

TEST_F(Revising, ALongSegmentIsFinalisedAndTheNextGetsItsTextAsContext) {
  RevisingConfig cfg;
  cfg.max_segment_sec = 4.0;
  auto p = make({pass("first part"), pass("first part done"), pass("second")}, cfg);
  feed(*p, 2.0);
  p->process();
  feed(*p, 2.0);
  const auto r = p->process();  // 4 s: finalised as if it were the last pass
  EXPECT_EQ(join(r.committed), "first part done");
  EXPECT_TRUE(fake->requests[1].is_last);
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 4.0);
  feed(*p, 2.0);
  p->process();
  EXPECT_EQ(fake->requests[2].context, "first part done");
  EXPECT_EQ(fake->samples[2], 32000u);  // only the new segment is re-decoded
  EXPECT_GE(p->provisional().at(0).start, 4.0);
}

TEST_F(Revising, APauseFlushesAndALongSilenceMovesTheOffset) {
  auto p = make({pass("before"), pass("after")});
  feed(*p, 1.0);
  EXPECT_EQ(join(p->start_silence().committed), "before");
  p->end_silence(1.0, 2.0);  // short: the silence joins the buffer
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 1.0);
  p->end_silence(6.0, 9.0);  // long: a new segment at the offset
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 9.0);
  t = 9.0;
  feed(*p, 1.0);
  const auto r = p->finish();
  ASSERT_EQ(r.committed.size(), 1u);
  EXPECT_GE(r.committed[0].start, 9.0);
}

TEST_F(Revising, TheLanguageComesFromThePassOrTheConfig) {
  auto p = make({pass("bonjour", "fr")});
  EXPECT_EQ(p->language(), "");
  feed(*p, 1.0);
  const auto r = p->finish();
  EXPECT_EQ(p->language(), "fr");
  EXPECT_EQ(r.committed.at(0).language, "fr");
  auto q = make({}, config([](auto& c) { c.language = "de"; }));
  EXPECT_EQ(q->language(), "de");
  feed(*q, 1.0);
  q->finish();
  EXPECT_EQ(fake->requests.at(0).language, "de");
}

TEST_F(Revising, ACorrectedFinalIsCountedAndNothingIsShownTwice) {
  RevisingConfig cfg;
  cfg.commit = {.hold_back = 0, .agreeing_passes = 1};
  auto p = make({pass("their going"), pass("they're going home")}, cfg);
  feed(*p, 2.0);
  EXPECT_EQ(join(p->process().committed), "their going");
  EXPECT_EQ(join(p->finish().committed), " home");
  EXPECT_EQ(p->corrections(), 1u);
}

TEST_F(Revising, TimedWordsGiveCommittedWordsTheDecodersOwnTimes) {
  RevisingConfig cfg;
  cfg.commit = {.hold_back = 1, .agreeing_passes = 1};
  auto p = make({timed_pass({{"one", 0.4, 0.8}, {" two", 1.0, 1.5}, {" three", 1.6, 1.9}}),
                 timed_pass({{"one", 0.4, 0.8}, {" two", 1.0, 1.5}, {" tree", 1.6, 2.0}, {" four", 2.4, 2.9}})},
                cfg);
  t = 5.0;  // the segment starts at 5 s of the stream
  p->end_silence(6.0, 5.0);
  feed(*p, 2.0);
  const auto r = p->process();
  ASSERT_EQ(r.committed.size(), 2u);
  EXPECT_DOUBLE_EQ(r.committed[0].start, 5.4);
  EXPECT_DOUBLE_EQ(r.committed[0].end, 5.8);
  EXPECT_DOUBLE_EQ(r.committed[1].start, 6.0);
  EXPECT_DOUBLE_EQ(r.committed[1].end, 6.5);
  ASSERT_EQ(p->provisional().size(), 1u);
  EXPECT_DOUBLE_EQ(p->provisional()[0].start, 6.6);
  // The final pass revised "three": the appended words take that pass's times.
  feed(*p, 1.0);
  const auto f = p->finish();
  ASSERT_EQ(f.committed.size(), 2u);
  EXPECT_EQ(join(f.committed), " tree four");
  EXPECT_DOUBLE_EQ(f.committed[0].start, 6.6);
  EXPECT_DOUBLE_EQ(f.committed[0].end, 7.0);
  EXPECT_DOUBLE_EQ(f.committed[1].start, 7.4);
  EXPECT_DOUBLE_EQ(f.committed[1].end, 7.9);
}

TEST_F(Revising, ALongSilenceResetsTheDecoderAndWarmupLeavesTheStreamAlone) {
  auto p = make({pass("x")}, config([](auto& c) { c.language = "de"; }));
  p->end_silence(1.0, 1.0);
  EXPECT_EQ(fake->resets, 0);
  p->end_silence(6.0, 7.0);
  EXPECT_EQ(fake->resets, 1);
  p->warmup();  // the default: one second of silence decoded as a segment of its own
  ASSERT_EQ(fake->requests.size(), 1u);
  EXPECT_TRUE(fake->requests[0].is_last);
  EXPECT_EQ(fake->requests[0].language, "de");
  EXPECT_EQ(fake->samples[0], 16000u);
  EXPECT_TRUE(p->hypothesis().empty());
}

TEST_F(Revising, BadOptionsAreRejected) {
  EXPECT_THROW(make({}, config([](auto& c) { c.pass_interval_sec = -1; })), Error);
  EXPECT_THROW(make({}, config([](auto& c) { c.min_audio_sec = 2, c.max_segment_sec = 1; })), Error);
}

}  // namespace
}  // namespace earshot::policy::commit

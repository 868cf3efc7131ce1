// AlignAtt for audio-LLM ASR (WhisperLiveKit's qwen3_simul, Qwen3-ASR) against a scripted decoder:
// every rule of the seed (border = max(2, 0.15 x audio tokens), rewind 0.12,
// checks after the first 3 steps, median over heads, audio_min_len, audio_max_len
// trimming (by whole encoder windows, or sliding as the seed), min chunk, the last 30 committed tokens as context, the
// language header, forced or per-session language, the UTF-8 hold, last passes).
#include "policy/alignatt/prompted_alignatt.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "common/error.h"
#include "scripted_prompted_decoder.h"

namespace earshot::policy {
namespace {

using scripted::kEnd;
using scripted::kEnglish;
using scripted::kLanguage;
using scripted::kMarker;
using scripted::ScriptedPromptedDecoder;

struct Step {
  int32_t next;             // the token this step returns
  std::vector<int> frames;  // per head; the attention of the step's input token
};
struct ScriptedPass {
  int n_audio = 100;
  int32_t first = 1;
  std::vector<Step> steps;
};

// Besides the shared vocabulary, 60.. are pieces of CJK text; German is supported too.
struct Scripted : ScriptedPromptedDecoder {
  std::deque<ScriptedPass> passes;
  ScriptedPass current;
  size_t at = 0;
  int encodes = 0;
  int ended = 0;  // end_pass() calls
  std::vector<size_t> encoded_samples;
  int window = 0;  // the encoder's window (window_samples())

  Scripted() {
    languages.insert("de");
    pieces[60] = "你";
    pieces[61] = "\xE5\xA5";  // the first two bytes of 好
    pieces[62] = "\xBD";
    pieces[63] = "世";
  }
  int encode(std::span<const float> pcm) override {
    ++encodes;
    encoded_samples.push_back(pcm.size());
    if (!passes.empty()) {
      current = passes.front();
      passes.pop_front();
    } else {
      current = {100, kEnd, {}};
    }
    return current.n_audio;
  }
  int window_samples() const override { return window; }
  void end_pass() override { ++ended; }
  int32_t prefill(const PromptedRequest& r) override {
    requests.push_back(r);
    at = 0;
    return current.first;
  }
  int32_t step(int32_t) override {
    if (at >= current.steps.size()) {
      frames.assign(1, 0);
      return kEnd;
    }
    frames = current.steps[at].frames;
    return current.steps[at++].next;
  }
};

struct PromptedAlignAtt : ::testing::Test {
  Scripted* fake = nullptr;
  double t = 0;
  std::unique_ptr<PromptedAlignAttProcessor> make(std::vector<ScriptedPass> passes, PromptedAlignAttConfig c = {}) {
    auto d = std::make_unique<Scripted>();
    d->passes.assign(passes.begin(), passes.end());
    fake = d.get();
    if (c.language == "auto") c.language = "en";  // most tests force it; the language tests set their own
    return std::make_unique<PromptedAlignAttProcessor>(std::move(d), c);
  }
  void feed(PromptedAlignAttProcessor& p, double seconds) {
    t += seconds;
    p.insert_audio(std::vector<float>(static_cast<size_t>(seconds * 16000), 0.01f), t);
  }
  static std::string join(const std::vector<Word>& words) {
    std::string s;
    for (const auto& w : words) s += w.text;
    return s;
  }
  // A pass: first token 1, then steps returning 2, 3, ... with the given frames (one head each).
  static ScriptedPass pass(int n_audio, std::vector<std::vector<int>> frames, int32_t first = 1) {
    ScriptedPass p{n_audio, first, {}};
    for (size_t i = 0; i < frames.size(); ++i) p.steps.push_back({static_cast<int32_t>(first + 1 + i), frames[i]});
    return p;
  }
};

TEST_F(PromptedAlignAtt, BorderAndRewindScaleWithTheAudioTokens) {
  EXPECT_EQ(PromptedAlignAttProcessor::threshold(0.15, 100, 2), 15);
  EXPECT_EQ(PromptedAlignAttProcessor::threshold(0.12, 100, 2), 12);
  EXPECT_EQ(PromptedAlignAttProcessor::threshold(0.15, 10, 2), 2);  // max(2, 1)
}

TEST_F(PromptedAlignAtt, StopsWhenTheMedianHeadReachesTheBorder) {
  // 20 audio tokens: border max(2, 3) = 3. Step 4 attends frame 18: 20 - 18 <= 3.
  auto p = make({pass(20, {{2}, {5}, {10}, {18}, {19}})});
  feed(*p, 1.0);
  const auto r = p->process();
  EXPECT_EQ(p->last_stop(), PromptedAlignAttProcessor::Stop::kBorder);
  // Tokens 1, 2, 3 are committed; 4 (whose step attended the border) and later are not.
  EXPECT_EQ(join(r.committed), "w1 w2 w3");
  EXPECT_EQ(p->committed_tokens(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p->last_attend_frame(), 18);  // the seed records the vote before the border check
}

TEST_F(PromptedAlignAtt, NoCheckBeforeTheThirdStep) {
  auto p = make({pass(20, {{19}, {19}, {19}, {19}})});
  feed(*p, 1.0);
  EXPECT_EQ(join(p->process().committed), "w1 w2");  // the 3rd step is the first checked
  EXPECT_EQ(p->last_stop(), PromptedAlignAttProcessor::Stop::kBorder);
}

TEST_F(PromptedAlignAtt, ARewindStopsThePassTwoTokensBack) {
  // 100 audio tokens: rewind 12; 14 -> 1 jumps back 13.
  auto p = make({pass(100, {{10}, {12}, {14}, {1}, {20}})});
  feed(*p, 1.0);
  EXPECT_EQ(join(p->process().committed), "w1 w2");
  EXPECT_EQ(p->last_stop(), PromptedAlignAttProcessor::Stop::kRewind);
  EXPECT_EQ(p->last_attend_frame(), 14);
}

TEST_F(PromptedAlignAtt, TheHeadsVoteByMedian) {
  auto p = make({pass(20, {{1, 2, 3}, {1, 2, 3}, {1, 2, 19}, {1, 18, 19}, {1, 2, 3}})});
  feed(*p, 1.0);
  EXPECT_EQ(join(p->process().committed), "w1 w2 w3");  // {1,2,19} votes 2; {1,18,19} votes 18
}

TEST_F(PromptedAlignAtt, NoPassOnLessThanAudioMinLen) {
  PromptedAlignAttConfig c;
  c.min_chunk = 0;
  auto p = make({pass(6, {})}, c);
  feed(*p, 0.4);
  p->process();
  EXPECT_EQ(fake->encodes, 0);
  feed(*p, 0.1);
  p->process();
  EXPECT_EQ(fake->encodes, 1);
}

TEST_F(PromptedAlignAtt, AtLeastMinChunkOfNewAudioBetweenPasses) {
  auto p = make({pass(20, {}), pass(30, {}), pass(30, {})});
  feed(*p, 1.0);
  p->process();
  feed(*p, 0.5);
  p->process();
  EXPECT_EQ(fake->encodes, 1);
  feed(*p, 0.5);
  p->process();
  EXPECT_EQ(fake->encodes, 2);
  p->process(/*is_last=*/true);  // a last pass needs no new audio
  EXPECT_EQ(fake->encodes, 3);
}

TEST_F(PromptedAlignAtt, TheLastPassDecodesToTheEndWithoutChecks) {
  auto p = make({pass(20, {{19}, {19}, {19}, {19}})});
  feed(*p, 1.0);
  EXPECT_EQ(join(p->process(/*is_last=*/true).committed), "w1 w2 w3 w4 w5");
  EXPECT_EQ(p->last_stop(), PromptedAlignAttProcessor::Stop::kEnd);
}

TEST_F(PromptedAlignAtt, TheTokenBudgetFollowsTheAudio) {
  // A running pass: min(6 x max(new s, 1) + 5, 40) tokens; 2 s of new audio -> 17.
  std::vector<std::vector<int>> frames(30, std::vector<int>{0});
  auto p = make({pass(100, frames)});
  feed(*p, 2.0);
  p->process();
  EXPECT_EQ(p->committed_tokens().size(), 17u);
  EXPECT_EQ(p->last_stop(), PromptedAlignAttProcessor::Stop::kBudget);
}

TEST_F(PromptedAlignAtt, TheLast30CommittedTokensAreTheContext) {
  std::vector<std::vector<int>> frames(20, std::vector<int>{0});
  auto p = make({pass(100, frames, 1), pass(100, frames, 11), pass(100, {})});
  feed(*p, 1.0);
  p->process(true);  // a last pass over 1 s: min(6 + 10, 120) = 16 tokens (1..16)
  feed(*p, 1.0);
  p->process(true);  // 2 s buffered: min(12 + 10, 120) = 22, the script's 21 (11..31)
  const std::vector<int32_t> before = p->committed_tokens();
  ASSERT_EQ(before.size(), 37u);
  feed(*p, 1.0);
  p->process(true);
  ASSERT_EQ(fake->requests.size(), 3u);
  EXPECT_TRUE(fake->requests[0].prefix_tokens.empty());
  EXPECT_EQ(fake->requests[1].prefix_tokens.size(), 16u);
  ASSERT_EQ(fake->requests[2].prefix_tokens.size(), 30u);
  EXPECT_EQ(fake->requests[2].prefix_tokens, std::vector<int32_t>(before.end() - 30, before.end()));
}

TEST_F(PromptedAlignAtt, TheBufferIsTrimmedToAudioMaxLen) {
  PromptedAlignAttConfig sliding;
  sliding.trim = PromptedAlignAttConfig::Trim::kSliding;
  auto p = make({pass(100, {{10}, {20}, {30}, {99}})}, sliding);
  fake->window = 8 * 16000;  // ignored: the seed's sliding trim
  feed(*p, 16.0);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 15.0);
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 1.0);
  const auto r = p->process();
  EXPECT_EQ(fake->encoded_samples.at(0), 15u * 16000u);
  // Times: frame / audio tokens x buffered seconds + the trimmed offset.
  ASSERT_EQ(r.committed.size(), 3u);
  EXPECT_DOUBLE_EQ(r.committed[0].start, 10.0 / 100 * 15 + 1.0);
  EXPECT_DOUBLE_EQ(r.committed[1].start, 20.0 / 100 * 15 + 1.0);
  EXPECT_DOUBLE_EQ(r.committed[0].end, r.committed[0].start + 0.1);
}

// The default trim drops whole encoder windows from the front, so the windows
// left (and what the model kept of them) are unchanged: past 15 s the buffer of
// an 8 s window model falls to 8 s and grows again. Word times keep the offset.
TEST_F(PromptedAlignAtt, TheBufferIsTrimmedByWholeEncoderWindows) {
  auto p = make({pass(100, {{10}, {20}, {30}, {99}})});
  fake->window = 8 * 16000;
  feed(*p, 14.0);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 14.0);
  feed(*p, 2.0);  // 16 s: one window goes
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 8.0);
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 8.0);
  const auto r = p->process();
  EXPECT_EQ(fake->encoded_samples.at(0), 8u * 16000u);
  ASSERT_EQ(r.committed.size(), 3u);
  EXPECT_DOUBLE_EQ(r.committed[0].start, 10.0 / 100 * 8 + 8.0);
  feed(*p, 7.0);  // 15 s: kept whole
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 15.0);
  feed(*p, 20.0);  // 35 s at once: three windows go
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 11.0);
  EXPECT_DOUBLE_EQ(p->buffer_start_time(), 32.0);
}

// Windows longer than the buffer may be, or a decoder without windows: the sliding trim.
TEST_F(PromptedAlignAtt, WithoutWindowsThatFitTheBufferTrimsAsTheSeed) {
  PromptedAlignAttConfig c;
  c.audio_max_len = 5.0;
  auto p = make({}, c);
  fake->window = 8 * 16000;
  feed(*p, 6.5);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 5.0);
  auto q = make({});
  feed(*q, 16.5);
  EXPECT_DOUBLE_EQ(q->buffered_seconds(), 15.0);
}

TEST_F(PromptedAlignAtt, AutoLanguageReadsTheHeaderAndKeepsItForTheSession) {
  PromptedAlignAttConfig c;
  c.language = "auto";
  auto d = std::make_unique<Scripted>();
  ScriptedPass first{100, kLanguage, {{kEnglish, {0}}, {kMarker, {0}}, {5, {0}}, {6, {0}}, {kEnd, {0}}}};
  d->passes = {first, pass(100, {})};
  fake = d.get();
  auto p = std::make_unique<PromptedAlignAttProcessor>(std::move(d), c);
  EXPECT_EQ(p->language(), "");
  feed(*p, 1.0);
  const auto r = p->process(true);
  EXPECT_EQ(join(r.committed), "w5 w6");  // the header is not transcript
  EXPECT_EQ(p->language(), "en");
  EXPECT_EQ(r.committed[0].language, "en");
  EXPECT_EQ(fake->requests[0].language, "");
  feed(*p, 1.0);
  p->process(true);
  EXPECT_EQ(fake->requests[1].language, "en");  // per-session: forced once named
}

TEST_F(PromptedAlignAtt, AForcedLanguageIsCheckedAndPassed) {
  PromptedAlignAttConfig c;
  c.language = "de";
  auto p = make({pass(100, {})}, c);
  feed(*p, 1.0);
  p->process(true);
  EXPECT_EQ(fake->requests[0].language, "de");
  c.language = "xx";
  EXPECT_THROW(make({}, c), Error);
}

TEST_F(PromptedAlignAtt, ACharacterCutAcrossTokensWaitsForTheNextPass) {
  // 你 好(2 tokens) 世: the border stop falls between the two pieces of 好.
  ScriptedPass cut{20, 60, {{61, {1}}, {62, {2}}, {63, {19}}}};
  auto p = make({cut});
  feed(*p, 1.0);
  // Step 3 (input 62) hits the border: emit [60, 61] = "你" + half of 好 -> only 你 commits.
  const auto r = p->process();
  EXPECT_EQ(join(r.committed), "你");
  EXPECT_EQ(p->committed_tokens(), (std::vector<int32_t>{60}));
}

TEST_F(PromptedAlignAtt, CjkTextCommitsCharacterByCharacterWithoutSpaces) {
  ScriptedPass s{20, 60, {{61, {1}}, {62, {2}}, {63, {3}}, {kEnd, {4}}}};
  auto p = make({s});
  feed(*p, 1.0);
  const auto r = p->process(true);
  ASSERT_EQ(r.committed.size(), 3u);
  EXPECT_EQ(join(r.committed), "你好世");
}

TEST_F(PromptedAlignAtt, FinishRunsLastPassesWhileTheyRunOutOfBudget) {
  // 1 s: a last pass gets min(6 + 10, 120) = 16 tokens.
  std::vector<std::vector<int>> frames(30, std::vector<int>{0});
  auto p = make({pass(20, frames, 1), pass(20, {{0}, {0}}, 30), pass(20, {}, 35)});
  feed(*p, 1.0);
  const auto r = p->finish();
  EXPECT_EQ(fake->encodes, 2);  // the second pass ended with the end token
  EXPECT_EQ(r.committed.size(), 16u + 3u);
}

TEST_F(PromptedAlignAtt, SpacingOfTheFirstWordOfTheSessionAndOfLaterPasses) {
  auto p = make({pass(20, {{0}}), pass(20, {{0}}, 7)});
  feed(*p, 1.0);
  EXPECT_EQ(p->process(true).committed.at(0).text, "w1");
  feed(*p, 1.0);
  EXPECT_EQ(p->process(true).committed.at(0).text, " w7");
}

TEST_F(PromptedAlignAtt, ALongSilenceResetsTheSessionAndMovesTheOffset) {
  auto p = make({pass(20, {{0}}), pass(20, {{0}}, 7)});
  feed(*p, 1.0);
  p->start_silence();
  p->end_silence(1.0, 2.0);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 2.0);  // a short pause is kept as silence
  p->end_silence(6.0, 10.0);
  EXPECT_DOUBLE_EQ(p->buffered_seconds(), 0.0);
  EXPECT_TRUE(p->committed_tokens().empty());
  t = 10.0;
  feed(*p, 1.0);
  const auto r = p->finish();
  ASSERT_FALSE(r.committed.empty());
  EXPECT_GE(r.committed[0].start, 10.0);
  EXPECT_EQ(r.committed[0].text, "w7");  // a new session: no leading space
}

// Speech reaches the policy through the stream's VAD in whole 32 ms windows, so
// a client's 1 s chunks come as 0.992 or 1.024 s: each gets its pass. With no
// slack (the seed's rule) a 0.992 s chunk waits for the next one.
TEST_F(PromptedAlignAtt, EachOneSecondChunkInVadWindowsGetsItsPass) {
  auto p = make({pass(20, {}), pass(30, {}), pass(40, {})});
  feed(*p, 0.992);
  p->process();
  feed(*p, 0.992);
  p->process();
  EXPECT_EQ(fake->encodes, 2);
  PromptedAlignAttConfig seed;
  seed.min_chunk_slack = 0;
  p = make({pass(20, {}), pass(30, {})}, seed);
  feed(*p, 0.992);
  p->process();
  EXPECT_EQ(fake->encodes, 0);
  feed(*p, 0.992);
  p->process();
  EXPECT_EQ(fake->encodes, 1);
}

// Every pass says it ended (PromptedAsrDecoder::end_pass), however it stops: a
// decoder that batches streams waits for a stream's decodes until then.
TEST_F(PromptedAlignAtt, EveryPassSaysItEnded) {
  auto p = make({pass(100, {{10}, {20}, {30}, {95}}), pass(100, {{10}})});
  feed(*p, 1.0);
  p->process();  // stopped at the border
  p->finish();   // last passes
  EXPECT_GE(fake->encodes, 2);
  EXPECT_EQ(fake->ended, fake->encodes);
  p->warmup();
  EXPECT_EQ(fake->ended, fake->encodes);
}

TEST_F(PromptedAlignAtt, BadSettingsAreRejected) {
  PromptedAlignAttConfig c;
  c.min_chunk_slack = -0.1;
  EXPECT_THROW(make({}, c), Error);
  c = {};
  c.border_fraction = 0;
  EXPECT_THROW(make({}, c), Error);
  c = {};
  c.audio_max_len = 0.2;
  EXPECT_THROW(make({}, c), Error);
}

}  // namespace
}  // namespace earshot::policy

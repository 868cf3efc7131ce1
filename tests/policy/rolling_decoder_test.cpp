// The rolling mode (Qwen3-ASR's streaming_transcribe, mlx_qwen3_asr,
// WhisperLiveKit's qwen3 backends) against a scripted decoder: the first passes
// of a segment decode without a prefix, later ones force the previous pass's
// tokens minus the last few (not the committed text), a new segment starts over,
// the language header is read, and the counts are options.
#include "policy/commit/rolling_decoder.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "common/error.h"
#include "scripted_prompted_decoder.h"

namespace earshot::policy::commit {
namespace {

using scripted::kEnd;
using scripted::kEnglish;
using scripted::kLanguage;
using scripted::kMarker;
using scripted::ScriptedPromptedDecoder;

// Each pass returns its scripted continuation.
struct Scripted : ScriptedPromptedDecoder {
  std::deque<std::vector<int32_t>> passes;
  std::vector<int32_t> current;
  size_t at = 0;

  int encode(std::span<const float>) override {
    current = passes.empty() ? std::vector<int32_t>{} : passes.front();
    if (!passes.empty()) passes.pop_front();
    current.push_back(kEnd);
    return 25;
  }
  int32_t prefill(const PromptedRequest& r) override {
    requests.push_back(r);
    at = 0;
    return current[at++];
  }
  int32_t step(int32_t) override { return at < current.size() ? current[at++] : kEnd; }
};

std::vector<int32_t> range(int32_t from, int32_t to) {
  std::vector<int32_t> v;
  for (int32_t t = from; t <= to; ++t) v.push_back(t);
  return v;
}

struct Rolling : ::testing::Test {
  Scripted* scripted = nullptr;
  std::unique_ptr<RollingDecoder> decoder;
  std::vector<float> audio = std::vector<float>(32000, 0.0f);
  void make(RollingConfig config = {}) {
    auto s = std::make_unique<Scripted>();
    scripted = s.get();
    decoder = std::make_unique<RollingDecoder>(std::move(s), config);
  }
  WindowPass pass(size_t index, std::string committed = "", std::string language = "en") {
    WindowRequest r;
    r.audio = audio;
    r.committed = std::move(committed);
    r.language = std::move(language);
    r.pass = index;
    return decoder->decode(r);
  }
};

TEST_F(Rolling, LaterPassesForceThePreviousTokensMinusTheLastFive) {
  make();
  scripted->passes = {range(1, 8), range(1, 10), range(7, 12), range(9, 13)};
  // Passes 1 and 2 (unfixed_passes = 2): no prefix, the committed text is not forced either.
  EXPECT_EQ(pass(0).hypothesis.text, " w1 w2 w3 w4 w5 w6 w7 w8");
  EXPECT_TRUE(scripted->requests[0].prefix_tokens.empty());
  EXPECT_EQ(pass(1, " w1 w2 w3").hypothesis.text, " w1 w2 w3 w4 w5 w6 w7 w8 w9 w10");
  EXPECT_TRUE(scripted->requests[1].prefix_tokens.empty());
  // Pass 3: pass 2's ten tokens minus five; the hypothesis is the prefix and what follows it.
  const WindowPass third = pass(2, " w1 w2 w3");
  EXPECT_EQ(scripted->requests[2].prefix_tokens, range(1, 5));
  EXPECT_EQ(decoder->last_prefix(), range(1, 5));
  EXPECT_EQ(third.hypothesis.text, " w1 w2 w3 w4 w5 w7 w8 w9 w10 w11 w12");
  // Pass 4: pass 3's whole output (its prefix included) minus five.
  pass(3);
  EXPECT_EQ(scripted->requests[3].prefix_tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(scripted->requests[3].language, "en");
}

TEST_F(Rolling, ANewSegmentStartsWithoutPrefix) {
  make();
  scripted->passes = {range(1, 9), range(1, 9), range(1, 9), range(20, 29)};
  pass(0);
  pass(1);
  pass(2);
  EXPECT_FALSE(scripted->requests[2].prefix_tokens.empty());
  pass(0);  // the processor's count restarts with each segment
  EXPECT_TRUE(scripted->requests[3].prefix_tokens.empty());
}

TEST_F(Rolling, AnOutputNoLongerThanTheRollbackGivesNoPrefix) {
  make();
  scripted->passes = {range(1, 3), range(1, 5), range(1, 6)};
  pass(0);
  pass(1);
  pass(2);
  EXPECT_TRUE(scripted->requests[2].prefix_tokens.empty());  // five tokens, all rolled back
}

TEST_F(Rolling, WithoutAForcedLanguageThePrefixKeepsTheHeader) {
  make({.unfixed_passes = 1, .unfixed_tokens = 1});
  scripted->passes = {{kLanguage, kEnglish, kMarker, 1, 2, 3}, {4}};
  scripted->pieces[kEnglish] = " Klingon";  // a header no language code is read from: nothing gets forced
  pass(0, "", "auto");
  const WindowPass b = pass(1, "", "auto");
  EXPECT_EQ(scripted->requests[1].language, "");
  EXPECT_EQ(scripted->requests[1].prefix_tokens, (std::vector<int32_t>{kLanguage, kEnglish, kMarker, 1, 2}));
  EXPECT_EQ(b.hypothesis.text, " w1 w2 w4");
}

TEST_F(Rolling, TheCountsAreOptions) {
  make({.unfixed_passes = 0, .unfixed_tokens = 2});
  scripted->passes = {range(1, 6), range(1, 6)};
  pass(0);
  pass(1);
  EXPECT_EQ(scripted->requests[1].prefix_tokens, range(1, 4));
  EXPECT_THROW(make({.unfixed_passes = -1}), Error);
  EXPECT_THROW(make({.unfixed_tokens = -1}), Error);
}

TEST_F(Rolling, TheLanguageHeaderIsReadAndKeptInThePrefix) {
  make({.unfixed_passes = 1, .unfixed_tokens = 1});
  std::vector<int32_t> first = {kLanguage, kEnglish, kMarker, 1, 2, 3};
  scripted->passes = {first, {4, 5}};
  const WindowPass a = pass(0, "", "auto");
  EXPECT_EQ(a.hypothesis.text, " w1 w2 w3");
  EXPECT_EQ(a.language, "en");
  ASSERT_EQ(a.hypothesis.tokens.size(), 3u);
  EXPECT_EQ(a.hypothesis.tokens[2], " w3");
  // The stream's language is forced from then on (the header is in the prompt):
  // the prefix is the earlier text without the header the model wrote.
  const WindowPass b = pass(1, "", "auto");
  EXPECT_EQ(scripted->requests[1].language, "en");
  EXPECT_EQ(scripted->requests[1].prefix_tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(b.hypothesis.text, " w1 w2 w4 w5");
}

// Through the commit layer: the processor numbers the passes of each segment.
TEST(RollingThroughTheProcessor, PassesAreCountedPerSegment) {
  auto s = std::make_unique<Scripted>();
  Scripted* scripted = s.get();
  // Each pass continues its prefix: pass 3 gets 1..4 and goes on from 5.
  scripted->passes = {range(1, 8), range(1, 9), range(5, 12), range(8, 14), range(1, 6)};
  RevisingConfig config;
  config.language = "en";
  RevisingProcessor processor(std::make_unique<RollingDecoder>(std::move(s), RollingConfig{}), config);
  const std::vector<float> two_seconds(32000, 0.0f);
  double t = 0;
  for (int i = 0; i < 3; ++i) {
    processor.insert_audio(two_seconds, t += 2);
    processor.process();
  }
  ASSERT_EQ(scripted->requests.size(), 3u);
  EXPECT_TRUE(scripted->requests[0].prefix_tokens.empty());
  EXPECT_TRUE(scripted->requests[1].prefix_tokens.empty());
  EXPECT_EQ(scripted->requests[2].prefix_tokens, range(1, 4));  // pass 2's nine tokens minus five
  processor.process(true);                                      // ends the segment
  EXPECT_EQ(scripted->requests[3].prefix_tokens, range(1, 7));  // pass 3's 1..12 minus five
  processor.insert_audio(two_seconds, t += 2);
  processor.process();
  ASSERT_EQ(scripted->requests.size(), 5u);
  EXPECT_TRUE(scripted->requests[4].prefix_tokens.empty());  // a new segment
}

}  // namespace
TEST_F(Rolling, TheConfiguredContextComesBeforeTheRequestsOwn) {
  make({.context = "earshot, Parakeet"});
  scripted->passes = {range(1, 3), range(1, 3)};
  pass(0);
  WindowRequest r;
  r.audio = audio;
  r.language = "en";
  r.pass = 1;
  r.context = "earlier text";
  decoder->decode(r);
  EXPECT_EQ(scripted->requests[0].context, "earshot, Parakeet");  // alone when the request has none
  EXPECT_EQ(scripted->requests[1].context, "earshot, Parakeet\nearlier text");
  make();
  scripted->passes = {range(1, 3)};
  decoder->decode(r);
  EXPECT_EQ(scripted->requests[0].context, "earlier text");  // none configured: the request's as it was
}

}  // namespace earshot::policy::commit

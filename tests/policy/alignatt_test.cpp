// AlignAtt against a scripted decoder: every expected word and time is exact.
#include <gtest/gtest.h>

#include "alignatt_rig.h"
#include "common/pass_stop.h"

namespace earshot::policy::testing {
namespace {

struct AlignAtt : ::testing::Test {
  std::shared_ptr<const whisper::Tokenizer> t = english_tokenizer();
  int32_t eot = t->special().eot, sot = t->special().sot, nt = t->special().no_timestamps;
  int32_t one = tok(*t, " one"), two = tok(*t, " two"), three = tok(*t, " three"), four = tok(*t, " four"),
          five = tok(*t, " five"), six = tok(*t, " six"), seven = tok(*t, " seven"), x = tok(*t, " x");
  FakeDecoder::Script passes(std::vector<std::vector<Step>> p) { return FakeDecoder::from_passes(std::move(p), eot); }
};

TEST_F(AlignAtt, BorderStopsAndCommittedTokensAreForcedNextPass) {
  Rig rig(t, passes({{{one, 10}, {two, 30}, {three, 80}}, {{three, 80}, {four, 110}}}));
  rig.feed(2.0);
  const ProcessResult r = rig.processor->process();
  EXPECT_DOUBLE_EQ(r.processed_until, 2.0);
  // " three" attends 20 frames before the end of 100: the border (25) drops it.
  expect_words(rig.keep(r.committed), {{" one", 0.2, 0.6}, {" two", 0.6, 0.7}});
  rig.feed(1.0);
  expect_words(rig.run(), {{" three", 1.6, 2.2}, {" four", 2.2, 2.3}});
  ASSERT_EQ(rig.fake->prompts.size(), 2u);
  EXPECT_EQ(rig.fake->prompts[0], (std::vector<int32_t>{sot, nt}));
  EXPECT_EQ(rig.fake->prompts[1], (std::vector<int32_t>{sot, nt, one, two}));
  EXPECT_EQ(rig.processor->last_attend_frame(), 110);  // the EOT step ends before the policy checks
  expect_words(rig.processor->hypothesis(),
               {{" one", 0.2, 0.6}, {" two", 0.6, 0.7}, {" three", 1.6, 2.2}, {" four", 2.2, 2.3}});
}

TEST_F(AlignAtt, RewindDiscardsThePass) {
  Rig rig(t, passes({{{one, 250}, {two, 20}}, {{one, 30}, {two, 60}}}));
  rig.feed(6.0);
  EXPECT_TRUE(rig.run().empty());  // 250 -> 20 jumps back 230 > 200 frames
  EXPECT_EQ(rig.processor->last_attend_frame(), -200);
  EXPECT_EQ(rig.processor->committed_blocks(), (std::vector<std::vector<int32_t>>{{}}));
  expect_words(rig.run(), {{" one", 0.6, 1.2}, {" two", 1.2, 1.3}});
}

TEST_F(AlignAtt, NoRewindRightAfterASpecialToken) {
  Rig rig(t, passes({{{one, 290}}, {{one, 40}, {two, 80}}}));
  rig.feed(6.0);
  EXPECT_TRUE(rig.run().empty());  // border at 290 of 300
  EXPECT_EQ(rig.processor->last_attend_frame(), 290);
  rig.feed(1.0);
  // 290 -> 40 is a jump of 250, but the query is <|notimestamps|>: accepted.
  expect_words(rig.run(), {{" one", 0.8, 1.6}, {" two", 1.6, 1.7}});
}

TEST_F(AlignAtt, TrimsWholeChunksKeepingExactTimes) {
  AlignAttConfig c;
  c.audio_max_len = 3.0;
  Rig rig(
      t,
      passes({{{one, 10}, {two, 40}}, {{two, 40}, {three, 90}}, {{three, 90}, {four, 140}}, {{four, 95}, {five, 140}}}),
      c);
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.2, 0.3}});
  rig.feed(1.0);
  expect_words(rig.run(), {{" two", 0.8, 0.9}});
  rig.feed(1.0);
  expect_words(rig.run(), {{" three", 1.8, 1.9}});
  rig.feed(1.0);  // 4 s > 3 s: the first second goes, its block " one" becomes context
  EXPECT_DOUBLE_EQ(rig.processor->buffer_start_time(), 1.0);
  EXPECT_DOUBLE_EQ(rig.processor->buffered_seconds(), 3.0);
  EXPECT_EQ(rig.processor->last_attend_frame(), 140 - 50);
  EXPECT_EQ(rig.processor->context_tokens(), std::vector<int32_t>{one});
  expect_words(rig.run(), {{" four", 2.9, 3.0}});
  EXPECT_EQ(rig.fake->prompts.back(), (std::vector<int32_t>{t->special().sot_prev, one, sot, nt, two, three}));
  EXPECT_EQ(rig.fake->encoded_samples.back(), 48000u);
  // Append-only: the hypothesis starts with everything committed, in order.
  const auto h = rig.processor->hypothesis();
  ASSERT_EQ(h.size(), rig.all_committed.size());
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i].text, rig.all_committed[i].text);
}

TEST_F(AlignAtt, ContextTrimsWordsFromTheFrontButNeverTheStaticPrompt) {
  AlignAttConfig c;
  c.static_init_prompt = " hello";
  c.init_prompt = " a b c d e";
  c.max_context_tokens = 3;
  Rig rig(t, passes({{{one, 10}}}), c);
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.2, 0.3}});
  const int32_t hello = tok(*t, " hello"), d = tok(*t, " d"), e = tok(*t, " e");
  EXPECT_EQ(rig.fake->prompts[0], (std::vector<int32_t>{t->special().sot_prev, hello, d, e, sot, nt}));
}

TEST_F(AlignAtt, ContextRespectsTextContextMinus20) {
  AlignAttConfig c;
  c.static_init_prompt = " hello";
  c.init_prompt = " a b c d e f g h i j k l";
  // n_text_ctx 30: context + SOT + forced must stay <= 10 tokens.
  Rig rig(t, passes({{{one, 10}}}), c, /*n_text_ctx=*/30);
  rig.feed(1.0);
  rig.run();
  std::vector<int32_t> want = {t->special().sot_prev, tok(*t, " hello")};
  for (const char* w : {" f", " g", " h", " i", " j", " k", " l"}) want.push_back(tok(*t, w));
  want.push_back(sot);
  want.push_back(nt);
  EXPECT_EQ(rig.fake->prompts[0], want);
}

TEST_F(AlignAtt, NeverFireHoldsTheLastWordUntilTheLastPass) {
  AlignAttConfig c;
  c.never_fire = true;
  Rig rig(t, passes({{{one, 5}, {two, 12}, {three, 19}, {x, 45}}, {{three, 19}, {four, 40}, {x, 90}}, {{four, 40}}}),
          c);
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.1, 0.24}, {" two", 0.24, 0.38}});
  expect_words(rig.processor->provisional(), {{" three", 0.38, 0.48}});
  EXPECT_EQ(rig.processor->committed_blocks(), (std::vector<std::vector<int32_t>>{{one, two}}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" three", 0.38, 0.8}});
  expect_words(rig.processor->provisional(), {{" four", 0.8, 0.9}});
  expect_words(rig.keep(rig.processor->finish().committed), {{" four", 0.8, 0.9}});
  EXPECT_TRUE(rig.processor->provisional().empty());
}

TEST_F(AlignAtt, StartSilenceFlushesWithTheLastPassThreshold) {
  Rig rig(t, passes({{{one, 10}, {two, 40}}}));
  rig.feed(1.0);
  // 40 of 50 frames: within 25 of the end, but not within 4.
  expect_words(rig.keep(rig.processor->start_silence().committed), {{" one", 0.2, 0.8}, {" two", 0.8, 0.9}});
}

TEST_F(AlignAtt, AFlushPreparedAheadEncodesOnceAndCommitsTheSameWords) {
  const FakeDecoder::Script script = passes({{{one, 10}, {two, 80}}, {{two, 80}, {three, 110}}});
  auto flush_after = [&](Rig& rig, bool prepare) {
    rig.feed(2.0);
    rig.run();
    rig.feed(0.5);
    if (prepare) {
      rig.processor->prepare_flush();
      EXPECT_EQ(rig.fake->encoded_samples.size(), 2u);  // the flush's encoder pass, now
      rig.processor->prepare_flush();                   // once: the buffer is what was encoded
      EXPECT_EQ(rig.fake->encoded_samples.size(), 2u);
    }
    rig.keep(rig.processor->start_silence().committed);
  };
  Rig plain(t, script), prepared(t, script);
  flush_after(plain, false);
  flush_after(prepared, true);
  EXPECT_EQ(prepared.fake->encoded_samples, plain.fake->encoded_samples);  // no second encode of that buffer
  EXPECT_EQ(prepared.fake->prompts, plain.fake->prompts);
  ASSERT_EQ(plain.all_committed.size(), 3u);
  EXPECT_EQ(prepared.all_committed.size(), plain.all_committed.size());
  for (size_t i = 0; i < plain.all_committed.size(); ++i) {
    EXPECT_EQ(prepared.all_committed[i].text, plain.all_committed[i].text);
    EXPECT_DOUBLE_EQ(prepared.all_committed[i].start, plain.all_committed[i].start);
    EXPECT_DOUBLE_EQ(prepared.all_committed[i].end, plain.all_committed[i].end);
  }
}

TEST_F(AlignAtt, AudioOrAPassAfterAPreparedFlushEncodesAgain) {
  // Audio inserted after the flush was prepared: the flush encodes the longer buffer.
  Rig more(t, passes({{{one, 10}}, {{one, 10}}, {{one, 10}, {two, 70}}}));
  more.feed(1.0);
  more.processor->prepare_flush();
  more.feed(0.5);
  more.keep(more.processor->start_silence().committed);
  EXPECT_EQ(more.fake->encoded_samples, (std::vector<size_t>{16000, 24000}));
  // A pass that is not a flush encodes as always and drops the prepared one.
  Rig pass(t, passes({{{one, 10}}, {{one, 10}}, {{one, 10}}}));
  pass.feed(1.0);
  pass.processor->prepare_flush();
  pass.run();
  pass.processor->finish();
  EXPECT_EQ(pass.fake->encoded_samples, (std::vector<size_t>{16000, 16000, 16000}));
  // Too little audio for a pass: nothing is encoded ahead either.
  Rig little(t, passes({{{one, 10}}}));
  little.processor->prepare_flush();
  EXPECT_TRUE(little.fake->encoded_samples.empty());
}

// A pass stopped by its session (common/pass_stop.h) in its encoder or between
// decoder steps leaves the stream as if it had not run: the next pass commits
// what it would have. A flush is never stopped.
TEST_F(AlignAtt, APassStoppedInFlightLeavesTheStreamAsIfItHadNotRun) {
  const std::vector<Step> first{{one, 10}, {two, 80}}, second{{two, 80}, {three, 110}};
  Rig plain(t, passes({first, second}));
  plain.feed(2.0);
  plain.run();
  plain.feed(0.5);
  plain.run();
  plain.keep(plain.processor->finish().committed);
  ASSERT_EQ(plain.all_committed.size(), 4u);
  // Graphs asked: 1 the encoder, 2 the first decoder step, 3 the second.
  for (int stop_at : {1, 2, 3}) {
    SCOPED_TRACE(stop_at);
    Rig rig(t, passes({first, second}));
    rig.feed(2.0);
    rig.run();
    rig.feed(0.5);
    {
      int asked = 0;
      PassListener listen([&] { return ++asked == stop_at; });
      EXPECT_THROW(rig.run(), PassStopped);
      EXPECT_EQ(asked, stop_at);
    }
    rig.run();
    {
      PassListener listen([] { return true; });  // a flush goes on whatever its caller says
      rig.keep(rig.processor->finish().committed);
    }
    ASSERT_EQ(rig.all_committed.size(), plain.all_committed.size());
    for (size_t i = 0; i < plain.all_committed.size(); ++i) {
      EXPECT_EQ(rig.all_committed[i].text, plain.all_committed[i].text);
      EXPECT_DOUBLE_EQ(rig.all_committed[i].start, plain.all_committed[i].start);
      EXPECT_DOUBLE_EQ(rig.all_committed[i].end, plain.all_committed[i].end);
    }
    // The pass run again decodes with the prompt the stopped one had.
    EXPECT_EQ(rig.fake->prompts.back(), plain.fake->prompts.back());
  }
}

TEST_F(AlignAtt, ShortSilenceKeepsContextLongSilenceResetsAndMovesTime) {
  Rig rig(t, passes({{{one, 10}}, {{two, 60}}, {{three, 10}}}));
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.2, 0.3}});
  rig.processor->end_silence(2.0, 3.0);
  EXPECT_DOUBLE_EQ(rig.processor->buffered_seconds(), 3.0);
  expect_words(rig.run(), {{" two", 1.2, 1.3}});
  EXPECT_EQ(rig.fake->prompts[1], (std::vector<int32_t>{sot, nt, one}));
  rig.processor->end_silence(6.0, 10.0);
  EXPECT_DOUBLE_EQ(rig.processor->buffered_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(rig.processor->buffer_start_time(), 10.0);
  EXPECT_TRUE(rig.processor->committed_blocks().empty());
  const auto pcm = seconds(1.0);
  rig.processor->insert_audio(pcm, 11.0);
  const ProcessResult r = rig.processor->process();
  expect_words(r.committed, {{" three", 10.2, 10.3}});
  EXPECT_DOUBLE_EQ(r.processed_until, 11.0);
  EXPECT_EQ(rig.fake->prompts[2], (std::vector<int32_t>{sot, nt}));
}

TEST_F(AlignAtt, NoSpeechEndsThePass) {
  Rig rig(t, passes({{{one, 10}}}));
  rig.fake->no_speech_logit = 30.0f;
  rig.feed(1.0);
  EXPECT_TRUE(rig.run().empty());
  AlignAttConfig off;
  off.nonspeech_prob = 1.0;
  Rig rig_off(t, passes({{{one, 10}}}), off);
  rig_off.fake->no_speech_logit = 30.0f;
  rig_off.feed(1.0);
  expect_words(rig_off.run(), {{" one", 0.2, 0.3}});
}

TEST_F(AlignAtt, BeamSearchCommitsTheBestBeam) {
  // Greedy would take " one" (p=0.57) and then a 4-way tie; " two seven" is more probable overall.
  auto script = [&](int, const std::vector<int32_t>& g) {
    Reply r;
    r.frame = 10 + 10 * static_cast<int>(g.size());
    if (g.empty()) {
      r.logits = {{one, 0.0f}, {two, -0.3f}};
    } else if (g.size() == 1 && g[0] == one) {
      r.logits = {{three, 0.0f}, {four, 0.0f}, {five, 0.0f}, {six, 0.0f}};
    } else if (g.size() == 1 && g[0] == two) {
      r.logits = {{seven, 5.0f}};
    } else {
      r.logits = {{eot, 10.0f}};
    }
    return r;
  };
  AlignAttConfig beam;
  beam.beams = 2;
  Rig rig(t, script, beam);
  rig.feed(2.0);
  expect_words(rig.run(), {{" two", 0.2, 0.4}, {" seven", 0.4, 0.5}});
  Rig greedy(t, script);
  greedy.feed(2.0);
  expect_words(greedy.run(), {{" one", 0.2, 0.4}, {" three", 0.4, 0.5}});
}

TEST_F(AlignAtt, LanguageIsDetectedAfterTwoSecondsAndWordsWaitAsProvisional) {
  auto m = multilingual_tokenizer();
  const int32_t mone = tok(*m, " one"), mtwo = tok(*m, " two"), mthree = tok(*m, " three"), mx = tok(*m, " x");
  Rig rig(m, FakeDecoder::from_passes({{{mone, 10}, {mtwo, 20}, {mx, 40}},
                                       {{mone, 10}, {mtwo, 20}, {mthree, 60}, {mx, 80}},
                                       {{mone, 10}, {mtwo, 20}, {mthree, 60}, {mx, 110}}},
                                      m->special().eot));
  rig.fake->detected_language_index = 2;  // "de"
  rig.feed(1.0);
  EXPECT_TRUE(rig.run().empty());
  EXPECT_EQ(rig.processor->language(), "");
  expect_words(rig.processor->provisional(), {{" one", 0.2, 0.4}, {" two", 0.4, 0.5}});
  rig.feed(1.0);  // 2.0 - 0.2 (first token) = 1.8 s < 2 s
  EXPECT_TRUE(rig.run().empty());
  EXPECT_EQ(rig.fake->language_detections, 0);
  expect_words(rig.processor->provisional(), {{" one", 0.2, 0.4}, {" two", 0.4, 1.2}, {" three", 1.2, 1.3}});
  rig.feed(0.5);  // 2.3 s after the first token: detect
  const auto words = rig.run();
  expect_words(words, {{" one", 0.2, 0.4}, {" two", 0.4, 1.2}, {" three", 1.2, 1.3}});
  EXPECT_EQ(rig.fake->language_detections, 1);
  EXPECT_EQ(rig.processor->language(), "de");
  EXPECT_EQ(words[0].language, "de");
  const auto& sp = m->special();
  EXPECT_EQ(rig.fake->prompts[0], (std::vector<int32_t>{sp.sot, sp.transcribe, sp.no_timestamps}));
  EXPECT_EQ(rig.fake->prompts[2],
            (std::vector<int32_t>{sp.sot, *m->language_token("de"), sp.transcribe, sp.no_timestamps}));
}

TEST_F(AlignAtt, FixedLanguageAndTranslateTaskShapeThePrompt) {
  auto m = multilingual_tokenizer();
  AlignAttConfig c;
  c.language = "fr";
  c.task = whisper::Task::kTranslate;
  Rig rig(m, FakeDecoder::from_passes({{{tok(*m, " one"), 10}}}, m->special().eot), c);
  rig.feed(1.0);
  const auto words = rig.run();
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].language, "fr");
  const auto& sp = m->special();
  EXPECT_EQ(rig.fake->prompts[0],
            (std::vector<int32_t>{sp.sot, *m->language_token("fr"), sp.translate, sp.no_timestamps}));
  EXPECT_EQ(rig.fake->language_detections, 0);
}

TEST_F(AlignAtt, SuppressedTokensAreNeverChosen) {
  // " one" is the script's favourite; " two" comes next.
  auto script = [&](int, const std::vector<int32_t>& g) {
    Reply r;
    r.frame = 10 + 10 * static_cast<int>(g.size());
    r.logits = g.empty() ? std::map<int32_t, float>{{one, 5.0f}, {two, 4.0f}} : std::map<int32_t, float>{{eot, 10.0f}};
    return r;
  };
  AlignAttConfig c;
  c.suppress_tokens = {one};
  Rig rig(t, script, c);
  rig.feed(1.0);
  expect_words(rig.run(), {{" two", 0.2, 0.3}});
}

TEST_F(AlignAtt, OnlyTheFirstStepAsksForTimestampLogits) {
  // With timestamps suppressed, later steps skip their rows; the first step
  // keeps the whole vocabulary for the no-speech probability at SOT.
  AlignAttConfig c;
  c.suppress_timestamps = true;
  Rig rig(t, passes({{{one, 10}, {two, 20}}}), c);
  rig.feed(1.0);
  expect_words(rig.run(), {{" one", 0.2, 0.4}, {" two", 0.4, 0.5}});
  const int whole = t->n_vocab(), timestamps = t->special().timestamp_begin;
  EXPECT_EQ(rig.fake->vocabulary_limits, (std::vector<int>{whole, timestamps, timestamps}));
}

TEST_F(AlignAtt, FirstStepNeverEndsOrEmitsABlank) {
  // EOT and " " are the script's favourites on the first step: both suppressed.
  const int32_t blank = tok(*t, " ");
  auto script = [&](int, const std::vector<int32_t>& g) {
    Reply r;
    r.frame = 10 + 10 * static_cast<int>(g.size());
    r.logits = g.empty() ? std::map<int32_t, float>{{eot, 9.0f}, {blank, 8.0f}, {three, 1.0f}}
                         : std::map<int32_t, float>{{eot, 10.0f}};
    return r;
  };
  Rig rig(t, script);
  rig.feed(1.0);
  expect_words(rig.run(), {{" three", 0.2, 0.3}});
}

TEST_F(AlignAtt, ConfigValidates) {
  AlignAttConfig c;
  c.audio_max_len = 40;
  EXPECT_THROW(c.validate(), Error);
  c = {};
  c.beams = 0;
  EXPECT_THROW(c.validate(), Error);
  c = {};
  c.language = "de";  // on an English-only model
  EXPECT_THROW(Rig(t, passes({{}}), c), Error);
}

TEST_F(AlignAtt, WarmupLeavesAFreshState) {
  Rig rig(t, passes({{{one, 10}}, {{two, 10}}}));
  rig.processor->warmup();
  EXPECT_DOUBLE_EQ(rig.processor->buffered_seconds(), 0.0);
  EXPECT_TRUE(rig.processor->hypothesis().empty());
  rig.feed(1.0);
  expect_words(rig.run(), {{" two", 0.2, 0.3}});
  EXPECT_EQ(rig.fake->prompts[1], (std::vector<int32_t>{sot, nt}));
}

}  // namespace
}  // namespace earshot::policy::testing

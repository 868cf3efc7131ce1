// AlignAtt where SimulStreaming (the reference implementation) fixes the
// arithmetic: the context limit, encoder content frames, timestamp tokens, and
// the per-pass trace that shows each of them.
#include <gtest/gtest.h>

#include "alignatt_rig.h"

namespace earshot::policy::testing {
namespace {

struct Reference : ::testing::Test {
  std::shared_ptr<const whisper::Tokenizer> t = english_tokenizer();
  int32_t eot = t->special().eot;
  int32_t one = tok(*t, " one"), two = tok(*t, " two"), three = tok(*t, " three");
  FakeDecoder::Script passes(std::vector<std::vector<Step>> p) { return FakeDecoder::from_passes(std::move(p), eot); }
  static AlignAttConfig reference_config() {
    AlignAttConfig c;
    c.set_guards(false);
    c.attention_window = 0;
    return c;
  }
};

std::vector<Step> distinct_tokens(int n) {
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) steps.push_back({1000 + i, i});
  return steps;
}

TEST_F(Reference, ContextLimitStopsWhenPromptAndTokensReachTheTextContext) {
  // The reference decodes while len(tokens) < n_text_ctx: prompt + kept = n_text_ctx.
  const int n_text_ctx = 40;
  Rig rig(t, passes({distinct_tokens(100)}), reference_config(), n_text_ctx);
  rig.feed(10.0);
  rig.run();
  ASSERT_EQ(rig.fake->prompts.size(), 1u);
  ASSERT_EQ(rig.processor->committed_blocks().size(), 1u);
  EXPECT_EQ(rig.fake->prompts[0].size() + rig.processor->committed_blocks()[0].size(), static_cast<size_t>(n_text_ctx));
}

TEST_F(Reference, ContentFramesRoundHalfAFrameDown) {
  // 1.01 s = 50.5 encoder frames: the reference counts 50. A model that reports
  // 51 does not move the border: " two" at frame 25 is 25 frames from the end.
  std::vector<std::string> lines;
  AlignAttConfig c;
  c.on_trace = [&](const std::string& line) { lines.push_back(line); };
  auto decoder = std::make_unique<FakeDecoder>(t, passes({{{one, 10}, {two, 25}}}));
  decoder->round_half_frame_up = true;
  AlignAttProcessor p(std::move(decoder), c);
  const auto pcm = seconds(1.01);
  p.insert_audio(pcm, 1.01);
  const auto words = p.process().committed;
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].text, " one");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"content_frames\":50,"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"stop\":\"border\""), std::string::npos) << lines[0];
}

TEST_F(Reference, TimestampTokensAreChoosableUnlessSuppressed) {
  // SimulStreaming does not suppress timestamps; a model that picks one keeps it
  // (it is special: no text, and it is forced like any other token).
  const int32_t ts = t->special().timestamp_begin + 10;
  auto script = [&](int, const std::vector<int32_t>& g) {
    Reply r;
    r.frame = 10 + 10 * static_cast<int>(g.size());
    if (g.empty()) {
      r.logits = {{one, 10.0f}};
    } else if (g.size() == 1) {
      r.logits = {{ts, 10.0f}, {two, 9.0f}};
    } else {
      r.logits = {{eot, 10.0f}};
    }
    return r;
  };
  Rig reference(t, script);
  reference.feed(2.0);
  reference.run();
  EXPECT_EQ(reference.processor->committed_blocks()[0], (std::vector<int32_t>{one, ts}));
  AlignAttConfig c;
  c.suppress_timestamps = true;
  Rig suppressed(t, script, c);
  suppressed.feed(2.0);
  suppressed.run();
  EXPECT_EQ(suppressed.processor->committed_blocks()[0], (std::vector<int32_t>{one, two}));
}

struct Traced {
  std::vector<std::string> lines;
  std::unique_ptr<Rig> rig;
  Traced(std::shared_ptr<const whisper::Tokenizer> t, FakeDecoder::Script script, AlignAttConfig c = {},
         int n_text_ctx = 448) {
    c.on_trace = [this](const std::string& line) { lines.push_back(line); };
    rig = std::make_unique<Rig>(std::move(t), std::move(script), c, n_text_ctx);
  }
  bool has(size_t pass, const std::string& part) const {
    return pass < lines.size() && lines[pass].find(part) != std::string::npos;
  }
};

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

TEST_F(Reference, TraceHasOneLinePerPassWithPromptTokensStopAndCommit) {
  Traced tr(t, passes({{{one, 10}, {two, 20}, {three, 95}}, {{three, 120}}}));
  tr.rig->feed(2.0);
  tr.rig->run();
  tr.rig->feed(1.0);
  tr.rig->run(/*is_last=*/true);
  ASSERT_EQ(tr.lines.size(), 2u);
  EXPECT_TRUE(tr.has(0, "{\"pass\":0,\"is_last\":false,\"language\":\"en\",\"buffer\":[0,2],\"content_frames\":100,"));
  EXPECT_TRUE(tr.has(0, "\"prompt\":" + ids_json(tr.rig->fake->prompts[0])));
  // Every decoded token with its frame: " three" at 95 is the border and is not committed.
  EXPECT_TRUE(tr.has(0, "{\"id\":" + std::to_string(one) + ",\"text\":\" one\",\"frame\":10,"));
  EXPECT_TRUE(tr.has(0, "{\"id\":" + std::to_string(three) + ",\"text\":\" three\",\"frame\":95,"));
  EXPECT_TRUE(tr.has(0, "\"stop\":\"border\",\"committed\":" + ids_json({one, two}) +
                            ",\"words\":[\" one\",\" two\"],\"guards\":[]}"));
  EXPECT_TRUE(tr.has(1, "\"pass\":1,\"is_last\":true"));
  EXPECT_TRUE(tr.has(1, "\"stop\":\"eot\",\"committed\":" + ids_json({three})));
  // The logit margin of a clear greedy choice: 10 over -30, after the softmax.
  EXPECT_TRUE(tr.has(0, "\"logit_margin\":40,"));
}

TEST_F(Reference, TraceNamesEveryStopReason) {
  {
    Traced tr(t, passes({{{one, 250}, {two, 20}}}));
    tr.rig->feed(6.0);
    tr.rig->run();
    EXPECT_TRUE(tr.has(0, "\"stop\":\"rewind\",\"committed\":[]")) << tr.lines.at(0);
  }
  {
    Traced tr(t, passes({{{one, 10}}}));
    tr.rig->fake->no_speech_logit = 30.0f;
    tr.rig->feed(1.0);
    tr.rig->run();
    EXPECT_TRUE(tr.has(0, "\"tokens\":[],\"stop\":\"no_speech\"")) << tr.lines.at(0);
  }
  {
    Traced tr(t, passes({distinct_tokens(100)}), reference_config(), 40);
    tr.rig->feed(10.0);
    tr.rig->run();
    EXPECT_TRUE(tr.has(0, "\"stop\":\"context_limit\"")) << tr.lines.at(0);
  }
  {
    Traced tr(t, passes({distinct_tokens(100)}));
    tr.rig->feed(2.0);
    tr.rig->run();
    EXPECT_TRUE(tr.has(0, "\"stop\":\"token_budget\"")) << tr.lines.at(0);
  }
}

TEST_F(Reference, TraceRecordsWhatAGuardDid) {
  Traced tr(t, passes({{{one, 10}}, {{two, 5}}}));
  tr.rig->feed(1.0);
  tr.rig->run();
  tr.rig->processor->end_silence(6.0, 0.0);
  tr.rig->feed(1.0);
  tr.rig->run();
  ASSERT_EQ(tr.lines.size(), 2u);
  EXPECT_TRUE(tr.has(1, "\"committed\":[],\"words\":[],\"guards\":[\"stale: dropped 1 leading words")) << tr.lines[1];
}

TEST_F(Reference, WarmupWritesNoTraceLine) {
  Traced tr(t, passes({{{one, 10}}}));
  tr.rig->processor->warmup();
  EXPECT_TRUE(tr.lines.empty());
  tr.rig->feed(1.0);
  tr.rig->run();
  EXPECT_TRUE(tr.has(0, "{\"pass\":0,"));
}

}  // namespace
}  // namespace earshot::policy::testing

// The Realtime projection over synthetic session event streams: items bounded by
// the VAD and the silence (the fallback without a turn stage), by a turn stage's
// TurnStarted/TurnEnded, or by the client's commits; deltas that spell each
// item's transcript; clear dropping the buffered speech; OpenAI's order of
// deltas on request; skipped audio and failures as error events.
#include <gtest/gtest.h>

#include "protocol/openai_realtime/projection.h"

namespace earshot::openai_realtime {
namespace {

using nlohmann::json;

Word word(const std::string& text, double start, double end, float p = 0.5f) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.probability = p;
  return w;
}

events::Event words(std::vector<Word> w) { return events::WordsCommitted{std::move(w)}; }

std::vector<std::string> types(const std::vector<json>& messages) {
  std::vector<std::string> out;
  for (const json& m : messages) out.push_back(m["type"]);
  return out;
}

struct Rig {
  explicit Rig(ProjectionOptions options = {}, TurnDetection turn = {}) : projection(options, ids) {
    SessionConfig c;
    c.turn = turn;
    projection.configure(c);
  }
  std::vector<json> feed(std::vector<events::Event> events, double clock) {
    std::vector<json> out = projection.on_events(events, clock);
    all.insert(all.end(), out.begin(), out.end());
    return out;
  }
  // The deltas of an item joined, and its completed transcript.
  std::string deltas(const std::string& item) const {
    std::string text;
    for (const json& m : all)
      if (m["type"] == "conversation.item.input_audio_transcription.delta" && m["item_id"] == item)
        text += m["delta"].get<std::string>();
    return text;
  }
  Ids ids{"t"};
  Projection projection;
  std::vector<json> all;
};

const std::string kDelta = "conversation.item.input_audio_transcription.delta";
const std::string kCompleted = "conversation.item.input_audio_transcription.completed";

TEST(RealtimeProjection, TheVadAndItsSilenceBoundAnItem) {
  TurnDetection turn;
  turn.prefix_padding_ms = 300;
  turn.silence_duration_ms = 500;
  Rig rig({}, turn);
  std::vector<json> out = rig.feed({events::SpeechStarted{1.0}, words({word(" Hello", 1.0, 1.4)})}, 1.5);
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_started", kDelta}));
  const std::string item = out[0]["item_id"];
  EXPECT_EQ(out[0]["audio_start_ms"], 700);  // the prefix padding before the speech
  EXPECT_EQ(out[1]["item_id"], item);
  EXPECT_EQ(out[1]["delta"], "Hello");  // an item's text starts without a space
  EXPECT_EQ(out[1]["content_index"], 0);
  // Speech ends at 2.0: nothing until 500 ms of silence went by on the audio clock.
  EXPECT_TRUE(rig.feed({words({word(" world.", 1.5, 2.0)}), events::SpeechEnded{2.0}}, 2.3).size() == 1);
  out = rig.feed({}, 2.6);
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                                                  "conversation.item.created", kCompleted}));
  EXPECT_EQ(out[0]["audio_end_ms"], 2500);  // the end of speech and the silence that ended it
  EXPECT_TRUE(out[1]["previous_item_id"].is_null());
  EXPECT_EQ(out[1]["item_id"], item);
  const json& created = out[2]["item"];
  EXPECT_EQ(created["id"], item);
  EXPECT_EQ(created["object"], "realtime.item");
  EXPECT_EQ(created["role"], "user");
  EXPECT_EQ(created["content"][0]["type"], "input_audio");
  EXPECT_EQ(out[3]["transcript"], "Hello world.");
  EXPECT_EQ(out[3]["transcript"], rig.deltas(item));
  EXPECT_EQ(out[3]["usage"], (json{{"type", "duration"}, {"seconds", 1.0}}));
  EXPECT_FALSE(out[3].contains("logprobs"));

  // Speech back within the silence continues the item; the next one follows it.
  out = rig.feed({events::SpeechStarted{3.0}, words({word(" One", 3.0, 3.3)}), events::SpeechEnded{3.4},
                  events::SpeechStarted{3.6}, words({word(" two", 3.6, 3.9)}), events::SpeechEnded{4.0}},
                 4.1);
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_started", kDelta, kDelta}));
  const std::string second = out[0]["item_id"];
  EXPECT_NE(second, item);
  out = rig.feed({events::Pause{4.0, 4.6, true}}, 4.6);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1]["previous_item_id"], item);
  EXPECT_EQ(out[3]["transcript"], "One two");
  EXPECT_EQ(rig.deltas(second), "One two");
}

TEST(RealtimeProjection, SemanticVadWithoutATurnStageWaitsLongerForAnUnfinishedSentence) {
  TurnDetection turn;
  turn.type = TurnType::kSemanticVad;
  turn.eagerness = "high";  // 0.5 s after a sentence's end, else 2 s
  Rig rig({}, turn);
  rig.feed({events::SpeechStarted{0.0}, words({word(" and then", 0.0, 1.0)}), events::SpeechEnded{1.0}}, 1.0);
  EXPECT_TRUE(rig.feed({}, 2.9).empty());
  EXPECT_EQ(types(rig.feed({}, 3.0)).back(), kCompleted);
  rig.feed({events::SpeechStarted{4.0}, words({word(" Done.", 4.0, 4.5)}), events::SpeechEnded{4.5}}, 4.5);
  EXPECT_EQ(types(rig.feed({}, 5.0)).back(), kCompleted);
}

TEST(RealtimeProjection, ATurnStagesEventsBoundItemsAndTheVadsAreIgnored) {
  Rig rig({.turn_events = true});
  std::vector<json> out =
      rig.feed({events::SpeechStarted{0.5}, events::TurnStarted{0, 0.5}, words({word(" Hi", 0.5, 0.8)}),
                events::SpeechEnded{0.9}, events::TurnEndLikely{0, 0.9, 0.7, {}}, events::SpeechStarted{1.2},
                events::TurnResumed{0, 1.2}, words({word(" there", 1.2, 1.5)}), events::SpeechEnded{1.6}},
               5.0);  // long after: only TurnEnded ends the item
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_started", kDelta, kDelta}));
  EXPECT_EQ(out[0]["audio_start_ms"], 200);
  out = rig.feed({events::TurnEnded{0, 1.6, 0.9, {}}}, 5.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                                                  "conversation.item.created", kCompleted}));
  EXPECT_EQ(out[0]["audio_end_ms"], 1600);
  EXPECT_EQ(out[3]["transcript"], "Hi there");
}

TEST(RealtimeProjection, ClientCommitsBoundItemsWithoutTurnDetection) {
  TurnDetection none;
  none.type = TurnType::kNone;
  Rig rig({}, none);
  std::vector<json> out =
      rig.feed({events::SpeechStarted{0.2}, words({word(" first", 0.2, 0.6)}), events::SpeechEnded{0.7}}, 3.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{kDelta}));  // no VAD events, no commit of its own
  const std::string item = out[0]["item_id"];
  out = rig.projection.commit(1.5, 1);
  ASSERT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.committed", "conversation.item.created"}));
  EXPECT_EQ(out[0]["item_id"], item);
  // The flush's words (audio before the commit) join the item; Finalized completes it; later words start another.
  out = rig.feed({words({word(" part", 1.0, 1.4)}), events::Finalized{1.5, 1}, words({word(" next", 1.6, 1.9)})}, 2.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{kDelta, kCompleted, kDelta}));
  EXPECT_EQ(out[1]["transcript"], "first part");
  EXPECT_NE(out[2]["item_id"], item);
  // The end of the stream closes the open item.
  out = rig.feed({events::EndOfStream{}}, 2.0);
  ASSERT_EQ(types(out),
            (std::vector<std::string>{"input_audio_buffer.committed", "conversation.item.created", kCompleted}));
  EXPECT_EQ(out[2]["transcript"], "next");
  EXPECT_TRUE(rig.projection.ended());
}

TEST(RealtimeProjection, ClearDropsTheBufferedSpeech) {
  TurnDetection none;
  none.type = TurnType::kNone;
  Rig rig({}, none);
  rig.feed({words({word(" noise", 0.0, 0.5)})}, 0.5);
  EXPECT_EQ(types(rig.projection.clear(1.0, 1)), (std::vector<std::string>{"input_audio_buffer.cleared"}));
  std::vector<json> out = rig.feed({words({word(" more", 0.6, 0.9)}), events::Finalized{1.0, 1}}, 1.0);
  EXPECT_TRUE(out.empty());  // audio before the clear
  out = rig.feed({words({word(" kept", 1.2, 1.5)})}, 1.6);
  ASSERT_EQ(types(out), (std::vector<std::string>{kDelta}));
  EXPECT_EQ(out[0]["delta"], "kept");
  rig.projection.commit(2.0, 2);
  out = rig.feed({events::Finalized{2.0, 2}}, 2.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{kCompleted}));
  EXPECT_EQ(out[0]["transcript"], "kept");
}

// A flush answers the requests made before it, not those made after: a clear's
// Finalized read after the next commit leaves that commit's item open.
TEST(RealtimeProjection, EachCommitCompletesWhenItsOwnFlushIsIn) {
  TurnDetection none;
  none.type = TurnType::kNone;
  Rig rig({}, none);
  rig.projection.clear(1.0, 1);
  rig.projection.commit(2.0, 2);
  std::vector<json> out = rig.feed({words({word(" gone", 0.2, 0.6)}), events::Finalized{1.0, 1}}, 1.0);
  EXPECT_TRUE(out.empty());
  out = rig.feed({words({word(" said", 1.2, 1.8)}), events::Finalized{2.0, 2}}, 2.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{kDelta, kCompleted}));
  EXPECT_EQ(out[1]["transcript"], "said");
}

TEST(RealtimeProjection, DeltasAfterTheCommitInOpenAIsOrderOnRequest) {
  Rig rig({.live_deltas = false});
  rig.feed({events::SpeechStarted{0.0}, words({word(" a", 0.0, 0.2), word(" b", 0.2, 0.4)}), events::SpeechEnded{0.5}},
           0.5);
  const std::vector<json> out = rig.feed({}, 1.2);
  EXPECT_EQ(types(out), (std::vector<std::string>{"input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                                                  "conversation.item.created", kDelta, kCompleted}));
  EXPECT_EQ(out[3]["delta"], "a b");
}

TEST(RealtimeProjection, LogprobsComeWithDeltasAndTheTranscriptWhenIncluded) {
  Ids ids("t");
  Projection p({}, ids);
  SessionConfig c;
  c.logprobs = true;
  p.configure(c);
  std::vector<json> out =
      p.on_events(std::vector<events::Event>{events::SpeechStarted{0},
                                             words({word(" yes", 0, 0.3, 0.25f), word(" no", 0.3, 0.5, -1)})},
                  0.5);
  ASSERT_EQ(out.size(), 2u);
  const json& probs = out[1]["logprobs"];
  ASSERT_EQ(probs.size(), 2u);
  EXPECT_EQ(probs[0]["token"], " yes");
  EXPECT_NEAR(probs[0]["logprob"].get<double>(), std::log(0.25), 1e-6);
  EXPECT_EQ(probs[0]["bytes"], (json{32, 121, 101, 115}));
  EXPECT_EQ(probs[1]["logprob"], 0.0);  // the model gave none
  out = p.on_events(std::vector<events::Event>{events::EndOfStream{}}, 0.5);
  EXPECT_EQ(out.back()["logprobs"].size(), 2u);
}

TEST(RealtimeProjection, SkippedAudioAndFailuresAreErrorEvents) {
  Rig rig;
  std::vector<json> out =
      rig.feed({events::SpeechStarted{0}, words({word(" x", 0, 0.4)}), events::AudioSkipped{1.0, 3.5}}, 4.0);
  ASSERT_EQ(types(out).back(), "error");
  EXPECT_EQ(out.back()["error"]["type"], "server_error");
  EXPECT_EQ(out.back()["error"]["code"], "audio_skipped");
  EXPECT_NE(out.back()["error"]["message"].get<std::string>().find("1.00 s to 3.50 s"), std::string::npos);
  EXPECT_FALSE(rig.projection.ended());  // the stream goes on
  const std::string item = out[0]["item_id"];
  out = rig.feed({events::StreamError{"model failed"}, events::EndOfStream{}}, 4.0);
  ASSERT_EQ(types(out), (std::vector<std::string>{"error", "conversation.item.input_audio_transcription.failed"}));
  EXPECT_EQ(out[0]["error"]["message"], "model failed");
  EXPECT_EQ(out[1]["item_id"], item);
  EXPECT_TRUE(rig.projection.ended());
}

TEST(RealtimeProjection, ForceFinalCompletesTheOpenItem) {
  Rig rig;
  rig.feed({events::SpeechStarted{0}, words({word(" so far", 0, 0.4)})}, 0.5);
  const std::vector<json> out = rig.projection.force_final();
  ASSERT_EQ(types(out),
            (std::vector<std::string>{"input_audio_buffer.committed", "conversation.item.created", kCompleted}));
  EXPECT_EQ(out.back()["transcript"], "so far");
  EXPECT_TRUE(rig.projection.ended());
  EXPECT_TRUE(rig.projection.force_final().empty());
}

}  // namespace
}  // namespace earshot::openai_realtime

// The one renderer of finished transcripts: segments, text, SRT, WebVTT, JSON.
#include "protocol/transcript.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace earshot::protocol {
namespace {

Word word(const std::string& text, double start, double end, int speaker = -1) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  w.speaker = speaker;
  return w;
}

std::string describe(const std::vector<Segment>& segments) {
  std::string out;
  for (const Segment& s : segments) out += std::to_string(s.start) + "-" + std::to_string(s.end) + s.text + "\n";
  return out;
}

TEST(Subtitles, SrtAndVttTimes) {
  std::vector<Segment> s = {{0.0, 2.5, " Hello."}, {3661.2, 3662.0, " Bye."}};
  EXPECT_EQ(format_srt(s), "1\n00:00:00,000 --> 00:00:02,500\nHello.\n\n2\n01:01:01,200 --> 01:01:02,000\nBye.\n\n");
  EXPECT_EQ(format_vtt(s),
            "WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello.\n\n01:01:01.200 --> 01:01:02.000\nBye.\n\n");
}

TEST(Segments, SentenceEndsSpeakersPausesAndLength) {
  // A sentence end (also before a closing quote or space), a new speaker, a 5 s gap.
  std::vector<Word> words = {word(" One", 0, 0.5),     word(" two.", 0.5, 1),    word(" Three?\" ", 1, 1.5),
                             word(" four", 1.5, 2),    word(" five", 2, 2.5, 2), word(" six", 2.5, 3, 2),
                             word(" seven", 8, 8.5, 2)};
  EXPECT_EQ(describe(segments(words)),
            "0.000000-1.000000 One two.\n"
            "1.000000-1.500000 Three?\" \n"
            "1.500000-2.000000 four\n"
            "2.000000-3.000000 five six\n"
            "8.000000-8.500000 seven\n");
  // Just under the pause threshold keeps the segment; the rule's threshold is a parameter.
  EXPECT_EQ(segments({word(" a", 0, 1), word(" b", 5.99, 6.5)}).size(), 1u);
  EXPECT_EQ(segments({word(" a", 0, 1), word(" b", 5.99, 6.5)}, {.pause_seconds = 2.0}).size(), 2u);
  // No punctuation, no pause: a segment closes before it would pass 30 s.
  std::vector<Word> long_run;
  for (int i = 0; i < 70; ++i) long_run.push_back(word(" w", i * 0.5, i * 0.5 + 0.5));
  std::vector<Segment> cut = segments(long_run);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_DOUBLE_EQ(cut[0].end, 30.0);
  EXPECT_DOUBLE_EQ(cut[1].start, 30.0);
  EXPECT_DOUBLE_EQ(cut[1].end, 35.0);
  EXPECT_TRUE(segments({}).empty());
}

TEST(Transcript, TextAndJson) {
  std::vector<Word> words = {word(" Hello", 0.5, 1.0), word(" world. ", 1.0, 1.25)};
  EXPECT_EQ(transcript_text(words), "Hello world.");
  EXPECT_EQ(words_json({word(" a\"", 0.25, 0.5)}), "[{\"text\":\" a\\\"\",\"start\":0.250,\"end\":0.500}]");
  nlohmann::json plain = nlohmann::json::parse(openai_json(words, segments(words), 10.2, "en", false));
  EXPECT_EQ(plain, nlohmann::json::parse(R"({"text":"Hello world.","usage":{"type":"duration","seconds":11}})"));
  nlohmann::json verbose = nlohmann::json::parse(openai_json(words, segments(words), 10.2, "en", true));
  EXPECT_EQ(verbose, nlohmann::json::parse(R"({"text":"Hello world.","usage":{"type":"duration","seconds":11},
    "task":"transcribe","language":"en","duration":10.2,
    "words":[{"word":"Hello","start":0.5,"end":1.0},{"word":"world.","start":1.0,"end":1.25}],
    "segments":[{"id":0,"start":0.5,"end":1.25,"text":" Hello world. "}]})"));
}

}  // namespace
}  // namespace earshot::protocol

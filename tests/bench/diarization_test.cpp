// bench --diarization-model's accounting (bench/diarization.h,
// diarization_metrics.h) over the diarization stage on a scripted activity
// source: the words of an ASR trace get the scripted speakers, the turns are
// transcribe's RTTM, the DER components are worked out by hand, truths are read
// from AUDIO.rttm and the report says which clips have none.
#include "bench/diarization.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../stages/scripted_activity.h"
#include "bench/report.h"
#include "common/error.h"
#include "stages/diarization/diarization_stage.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;
namespace dz = stages::diarization;
using earshot::testing::ScriptedActivity;
using earshot::testing::Turn;

// A clock that moves 0.25 s per reading: the stage's time is counted in readings.
class TickClock : public Clock {
 public:
  double now() override { return t_ += 0.25; }
  void sleep_until(double) override {}

 private:
  double t_ = 0;
};

Word word(const std::string& text, double start, double end) {
  Word w;
  w.text = text;
  w.start = start;
  w.end = end;
  return w;
}

// 4 s of audio in 1 s emissions: w0 [0,1] committed at 2 s, w1 [1,2] at 3 s, w2
// [2,3] at 4 s, w3 [3,4] by finish(); speaker 0 talks 0..2 s, speaker 1 2..4 s.
StreamTrace four_words() {
  StreamTrace t;
  t.audio_seconds = 4;
  const int committed[] = {0, 1, 1, 1, 1};
  for (int i = 0; i < 5; ++i) t.emissions.push_back({0, static_cast<double>(std::min(i + 1, 4)), 0, committed[i], 0});
  for (int i = 0; i < 4; ++i) t.words.push_back({word(" w" + std::to_string(i), i, i + 1.0), 0, 0, 0, 0});
  return t;
}

DiarizedStream diarize(const StreamTrace& trace, int* pushes = nullptr) {
  auto source = std::make_unique<ScriptedActivity>(std::vector<Turn>{{0, 2, 0}, {2, 4, 1}}, 1.0, [pushes] {
    if (pushes) ++*pushes;
  });
  dz::DiarizationStage stage(std::move(source), {}, nullptr, nullptr);
  const std::vector<float> audio(4 * 16000, 0.1f);
  TickClock clock;
  return diarize_trace(trace, audio, stage, clock);
}

TEST(BenchDiarization, TheTraceIsReplayedThroughTheStage) {
  int pushes = 0;
  const DiarizedStream s = diarize(four_words(), &pushes);
  ASSERT_EQ(s.words.size(), 4u);
  EXPECT_EQ(s.words[0].speaker, 1);
  EXPECT_EQ(s.words[1].speaker, 1);
  EXPECT_EQ(s.words[2].speaker, 2);
  EXPECT_EQ(s.words[3].speaker, 2);
  EXPECT_EQ(pushes, 4);  // the audio before each of the four emissions that had new audio
  // Timed calls: 4 audio pushes, 4 WordsCommitted, 5 ProvisionalChanged, EndOfStream: 14 x 0.25 s.
  EXPECT_DOUBLE_EQ(s.compute_seconds, 14 * 0.25);
}

Utterance clip(const std::string& id, double seconds) { return Utterance{id, "/data/" + id + ".wav", "", seconds}; }

TEST(BenchDiarization, TurnsAreTranscribesRttmAndTheDerIsWorkedOut) {
  const DiarizedStream s = diarize(four_words());
  // Truth: A 0..2, B 2..3.5, C 3.5..4 (one more speaker than the stage heard).
  const SpeakerTruth truth{"/data/talk.rttm", parse_rttm("SPEAKER talk 1 0 2 <NA> <NA> A <NA> <NA>\n"
                                                         "SPEAKER talk 1 2 1.5 <NA> <NA> B <NA> <NA>\n"
                                                         "SPEAKER talk 1 3.5 0.5 <NA> <NA> C <NA> <NA>\n",
                                                         "truth")};
  const DiarizedClip c = score_clip(clip("talk", 4), s, truth);
  // The segments of the words by speaker, under the truth's file id.
  ASSERT_EQ(c.turns.size(), 2u);
  EXPECT_EQ(c.turns[0], (SpeakerSegment{"talk", "1", 0, 2, "S1"}));
  EXPECT_EQ(c.turns[1], (SpeakerSegment{"talk", "1", 2, 2, "S2"}));
  EXPECT_EQ(c.speakers, 2);
  EXPECT_EQ(c.words, 4);
  EXPECT_EQ(c.unknown_words, 0);
  EXPECT_EQ(c.truth, "/data/talk.rttm");
  // Collar 0: A->S1 (2 s together), B->S2 (1.5 s); C's 0.5 s is given to S2,
  // which is B's: confusion 0.5 of 4 s of speaker time, nothing missed or extra.
  ASSERT_TRUE(c.der_no_collar.has_value());
  EXPECT_NEAR(c.der_no_collar->scored_speaker, 4.0, 1e-9);
  EXPECT_NEAR(c.der_no_collar->missed_speaker, 0.0, 1e-9);
  EXPECT_NEAR(c.der_no_collar->falarm_speaker, 0.0, 1e-9);
  EXPECT_NEAR(c.der_no_collar->speaker_error, 0.5, 1e-9);
  EXPECT_NEAR(c.der_no_collar->der_percent(), 12.5, 1e-9);
  // Collar 0.25 around 0, 2, 3.5 and 4: scored [0.25,1.75] and [2.25,3.25], all right.
  ASSERT_TRUE(c.der.has_value());
  EXPECT_NEAR(c.der->scored_speaker, 2.5, 1e-9);
  EXPECT_NEAR(c.der->der_percent(), 0.0, 1e-9);

  // Without a truth: the clip's id and channel 1, no DER.
  const DiarizedClip bare = score_clip(clip("bare", 4), s, std::nullopt);
  EXPECT_EQ(bare.turns[0].file, "bare");
  EXPECT_FALSE(bare.der.has_value());
  EXPECT_TRUE(bare.truth.empty());

  // The total sums the scored clips' seconds; the compute is every clip's.
  DiarizedClip second = c;
  second.id = "talk2";
  const DiarizationSummary d = summarize_diarization("scripted", {c, bare, second}, 2.0);
  EXPECT_EQ(d.scored_clips, 2);
  EXPECT_NEAR(d.audio_seconds, 12.0, 1e-9);
  EXPECT_NEAR(d.compute_seconds, 3 * 14 * 0.25, 1e-9);
  EXPECT_NEAR(d.rtf_wall(), 3 * 14 * 0.25 / 12.0, 1e-9);
  EXPECT_NEAR(*d.rtf_cpu(), 2.0 / 12.0, 1e-9);
  EXPECT_NEAR(d.der_no_collar->speaker_error, 1.0, 1e-9);
  EXPECT_NEAR(d.der_no_collar->der_percent(), 12.5, 1e-9);

  // Every report says which clip has no truth.
  BenchReport report;
  SystemResult system;
  system.name = "alignatt";
  system.diarization = d;
  report.systems.push_back(system);
  std::ostringstream table, json, markdown;
  write_table(table, report);
  write_json(json, report);
  write_markdown(markdown, report);
  EXPECT_NE(table.str().find("bare: no RTTM truth"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("total (2)"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("12.50"), std::string::npos) << table.str();
  EXPECT_NE(json.str().find("\"note\":\"no RTTM truth: compute only\""), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"confusion_seconds\":0.5"), std::string::npos) << json.str();
  EXPECT_NE(markdown.str().find("| bare | no RTTM truth"), std::string::npos) << markdown.str();
}

TEST(BenchDiarization, CpwerIsReportedForClipsWithAnStm) {
  const DiarizedStream s = diarize(four_words());  // w0 w1 by speaker 1, w2 w3 by speaker 2
  DiarizedClip talk = score_clip(clip("talk", 4), s, std::nullopt);
  // The truth says A spoke w0 and w2, B w1 and w3: S1 ("w0 w1") with A and S2
  // ("w2 w3") with B, one substitution each (the other way: a deletion and an
  // insertion each).
  const std::vector<StmSegment> stm =
      parse_stm("talk 1 A 0 1 w0\ntalk 1 B 1 2 w1\ntalk 1 A 2 3 w2\ntalk 1 B 3 4 w3\n", "talk.stm");
  talk.word_truth = "/data/talk.stm";
  talk.cpwer = score_cpwer_words(stm, s.words, NormalizerKind::kEnglish);
  EXPECT_EQ(talk.cpwer->words.reference, 4);
  EXPECT_EQ(talk.cpwer->words.substitutions, 2);
  EXPECT_EQ(talk.cpwer->words.errors(), 2);
  const DiarizedClip bare = score_clip(clip("bare", 4), s, std::nullopt);
  DiarizedClip second = talk;
  second.id = "talk2";
  second.cpwer = score_cpwer_words(parse_stm("talk2 1 A 0 2 w0 w1\ntalk2 1 B 2 4 w2 w3\n", "talk2.stm"), s.words,
                                   NormalizerKind::kEnglish);
  EXPECT_EQ(second.cpwer->words.errors(), 0);
  const DiarizationSummary d = summarize_diarization("scripted", {talk, bare, second}, std::nullopt);
  EXPECT_EQ(d.cpwer_clips, 2);
  ASSERT_TRUE(d.cpwer.has_value());
  EXPECT_EQ(d.cpwer->words.reference, 8);
  EXPECT_EQ(d.cpwer->words.errors(), 2);
  EXPECT_DOUBLE_EQ(d.cpwer->rate(), 0.25);

  BenchReport report;
  SystemResult system;
  system.name = "alignatt";
  system.diarization = d;
  report.systems.push_back(system);
  std::ostringstream table, json, markdown;
  write_table(table, report);
  write_json(json, report);
  write_markdown(markdown, report);
  EXPECT_NE(table.str().find("talk: cpWER 50.00% (S 2, D 0, I 0 of 4 reference words"), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("bare: no STM transcript: no cpWER"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("total (2): cpWER 25.00%"), std::string::npos) << table.str();
  EXPECT_NE(json.str().find("\"cpwer_clips\":2,\"cpwer\":{\"reference_words\":8,\"substitutions\":2,\"deletions\":0,"
                            "\"insertions\":0,\"errors\":2,\"cpwer_percent\":25,"),
            std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find("\"word_truth\":\"/data/talk.stm\",\"cpwer\":{\"reference_words\":4,"), std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find("\"mapping\":[[\"A\",\"S1\"],[\"B\",\"S2\"]]"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"word_truth\":null,\"cpwer\":null"), std::string::npos) << json.str();
  EXPECT_NE(markdown.str().find("| talk | 50.00 | 2 | 0 | 0 | 4 | 2 / 2 |"), std::string::npos) << markdown.str();
  EXPECT_NE(markdown.str().find("| **total** | 25.00 | 2 | 0 | 0 | 8 | 4 / 4 |"), std::string::npos) << markdown.str();

  // Without any STM: no cpWER, and every report says so.
  const DiarizationSummary none = summarize_diarization("scripted", {bare}, std::nullopt);
  EXPECT_FALSE(none.cpwer.has_value());
  report.systems[0].diarization = none;
  std::ostringstream table2, json2, markdown2;
  write_table(table2, report);
  write_json(json2, report);
  write_markdown(markdown2, report);
  EXPECT_NE(table2.str().find("no clip has an STM transcript (AUDIO.stm next to the audio): no cpWER"),
            std::string::npos)
      << table2.str();
  EXPECT_NE(json2.str().find("\"cpwer_clips\":0,\"cpwer\":null"), std::string::npos) << json2.str();
  EXPECT_NE(markdown2.str().find("No cpWER: no clip has an STM transcript"), std::string::npos) << markdown2.str();
}

TEST(BenchDiarization, TruthsAreReadFromTheRttmNextToTheAudio) {
  const fs::path dir = fs::temp_directory_path() / ("earshot-bench-diarization-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "talk.rttm") << "SPEAKER talk 1 0.5 1.0 <NA> <NA> A <NA> <NA>\n";
  std::vector<Utterance> utterances = {{"talk", (dir / "talk.wav").string(), "", 0},
                                       {"quiet", (dir / "quiet.flac").string(), "", 0}};
  std::vector<std::optional<SpeakerTruth>> truths = load_speaker_truths(utterances);
  ASSERT_EQ(truths.size(), 2u);
  ASSERT_TRUE(truths[0].has_value());
  EXPECT_EQ(truths[0]->path, (dir / "talk.rttm").string());
  EXPECT_EQ(truths[0]->segments.size(), 1u);
  EXPECT_FALSE(truths[1].has_value());

  // A truth describing two files is refused, naming the file.
  std::ofstream(dir / "quiet.rttm") << "SPEAKER a 1 0 1 <NA> <NA> A <NA> <NA>\nSPEAKER b 1 0 1 <NA> <NA> A <NA> <NA>\n";
  try {
    load_speaker_truths(utterances);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find((dir / "quiet.rttm").string() + ": the RTTM truth of"), std::string::npos)
        << e.what();
  }
  // One that does not parse names its line.
  std::ofstream(dir / "quiet.rttm") << "SPEAKER a 1 zero 1 <NA> <NA> A <NA> <NA>\n";
  try {
    load_speaker_truths(utterances);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quiet.rttm"), std::string::npos) << e.what();
  }

  // STM transcripts the same way: AUDIO.stm next to the audio, or none.
  std::ofstream(dir / "talk.stm") << ";; a comment\ntalk 1 A 0.5 1.5 hello\n";
  std::vector<std::optional<WordTruth>> words = load_word_truths(utterances);
  ASSERT_EQ(words.size(), 2u);
  ASSERT_TRUE(words[0].has_value());
  EXPECT_EQ(words[0]->path, (dir / "talk.stm").string());
  ASSERT_EQ(words[0]->segments.size(), 1u);
  EXPECT_EQ(words[0]->segments[0].transcript, "hello");
  EXPECT_FALSE(words[1].has_value());
  // A malformed one names the file and line; one of two files is refused.
  std::ofstream(dir / "quiet.stm") << "quiet 1 A 0.5\n";
  try {
    load_word_truths(utterances);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find((dir / "quiet.stm").string() + ":1: an STM segment"), std::string::npos)
        << e.what();
  }
  std::ofstream(dir / "quiet.stm") << "a 1 A 0 1 x\nb 1 A 0 1 y\n";
  try {
    load_word_truths(utterances);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "quiet.stm").string() + ": the STM transcript of"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace earshot::bench

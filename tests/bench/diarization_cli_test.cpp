// `earshot bench --diarization-model` end to end with the real binaries: a
// generated Whisper and a generated Sortformer (random weights: the DER's value
// means nothing, the loop is what is checked) on the two-speaker conversation
// with its RTTM truth, beside a LibriVox clip without one. The bench's turns are
// the RTTM `earshot transcribe --format rttm` writes for the same audio and
// settings, its DER components are the scorer's (and earshot-der's) on that file, and the clip
// without a truth is diarized for its compute only. With an AUDIO.stm beside the
// audio, the bench's cpWER is the scorer's on transcribe's words and speakers.
// With --capacity, every session runs the stage live and the run reports its
// lag, drops, speaker delays and compute under the diarized pass rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/command.h"
#include "bench/cpwer.h"
#include "bench/der.h"

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;
using earshot::testing::run_command;

std::string read(const fs::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class BenchDiarizationCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("earshot-bench-diarization-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "data");
    const std::string shared = EARSHOT_SHARED_DIR;
    for (const std::string& command :
         {std::string(EARSHOT_MAKE_MODEL) + " --template " + shared + "/models/for-tests-ggml-tiny.en.bin --out " +
              (dir_ / "asr.bin").string() + " --vocab-tiktoken " + shared +
              "/models/whisper-gpt2.tiktoken --type f32 --seed 7 --n-audio-state 64 --n-audio-head 2 "
              "--n-audio-layer 1 --n-text-state 64 --n-text-head 2 --n-text-layer 2",
          std::string(EARSHOT_MAKE_SORTFORMER) + " --out " + (dir_ / "sf.gguf").string() + " --seed 5",
          std::string(EARSHOT_MAKE_CONVERSATION) + " --data " + shared + "/data --wav " +
              (dir_ / "data/talk.wav").string() + " --rttm " + (dir_ / "data/talk.rttm").string() +
              " --file-id talk"}) {
      const auto r = run_command(command);
      ASSERT_EQ(r.status, 0) << command << "\n" << r.output;
    }
    std::ofstream(dir_ / "data/talk.txt") << "and so my fellow americans";
    fs::copy_file(shared + "/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav", dir_ / "data/good.wav");
    std::ofstream(dir_ / "data/good.txt") << "he was not an ill disposed young man";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  // The options bench and transcribe share.
  static std::string models() {
    return " --model " + (dir_ / "asr.bin").string() + " --diarization-model " + (dir_ / "sf.gguf").string() +
           " --diarization-chunk-ms 1600 --threads 1 --language en --chunk 0.5";
  }
  static fs::path dir_;
};
fs::path BenchDiarizationCli::dir_;

void expect_components(const nlohmann::json& j, const DerScore& expected, double collar) {
  SCOPED_TRACE("collar " + std::to_string(collar));
  EXPECT_EQ(j["collar"].get<double>(), collar);
  EXPECT_EQ(j["overlap"], "scored");
  // JSON keeps 6 significant digits.
  const auto near = [](const nlohmann::json& v, double x) { EXPECT_NEAR(v.get<double>(), x, 1e-5 * std::max(1.0, x)); };
  near(j["scored_speaker_seconds"], expected.scored_speaker);
  near(j["missed_seconds"], expected.missed_speaker);
  near(j["false_alarm_seconds"], expected.falarm_speaker);
  near(j["confusion_seconds"], expected.speaker_error);
  near(j["missed_percent"], expected.missed_percent());
  near(j["false_alarm_percent"], expected.falarm_percent());
  near(j["confusion_percent"], expected.speaker_error_percent());
  near(j["der_percent"], expected.der_percent());
}

// earshot-der's seconds for `label` ("missed speaker time"...), as it prints them (2 decimals); -1 when absent.
double der_tool_seconds(const std::string& output, const std::string& label) {
  const size_t at = output.find(label);
  if (at == std::string::npos) return -1;
  return std::stod(output.substr(at + label.size()));
}

// The same components as earshot-der prints them for the truth and transcribe's file.
void expect_der_tool(const nlohmann::json& j, const fs::path& truth, const fs::path& hypothesis, double collar) {
  const auto r = run_command(std::string(EARSHOT_DER_BIN) + " --ref " + truth.string() + " --hyp " +
                             hypothesis.string() + " --collar " + std::to_string(collar));
  ASSERT_EQ(r.status, 0) << r.output;
  SCOPED_TRACE(r.output);
  EXPECT_NEAR(der_tool_seconds(r.output, "scored speaker time"), j["scored_speaker_seconds"].get<double>(), 0.006);
  EXPECT_NEAR(der_tool_seconds(r.output, "missed speaker time"), j["missed_seconds"].get<double>(), 0.006);
  EXPECT_NEAR(der_tool_seconds(r.output, "false alarm speaker"), j["false_alarm_seconds"].get<double>(), 0.006);
  EXPECT_NEAR(der_tool_seconds(r.output, "speaker error"), j["confusion_seconds"].get<double>(), 0.006);
  EXPECT_NEAR(der_tool_seconds(r.output, "DER"), j["der_percent"].get<double>(), 0.006);
}

TEST_F(BenchDiarizationCli, DerComponentsAreTheScorersOnTranscribesRttm) {
  const fs::path json = dir_ / "bench.json", md = dir_ / "bench.md";
  const auto bench = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + (dir_ / "data").string() + models() +
                                 " --json " + json.string() + " --markdown " + md.string());
  ASSERT_EQ(bench.status, 0) << bench.output;
  const fs::path ours = dir_ / "ours.rttm";
  const auto transcribe = run_command(std::string(EARSHOT_BIN) + " transcribe" + models() + " --format rttm --output " +
                                      ours.string() + " " + (dir_ / "data/talk.wav").string());
  ASSERT_EQ(transcribe.status, 0) << transcribe.output;

  const nlohmann::json j = nlohmann::json::parse(read(json));
  ASSERT_EQ(j["systems"].size(), 1u);
  const nlohmann::json& d = j["systems"][0]["diarization"];
  ASSERT_TRUE(d.is_object()) << j["systems"][0].dump();
  ASSERT_EQ(d["clips"].size(), 2u);
  const nlohmann::json& good = d["clips"][0];
  const nlohmann::json& talk = d["clips"][1];
  ASSERT_EQ(good["id"], "good");
  ASSERT_EQ(talk["id"], "talk");

  // The stage's turns are transcribe's file for the same audio and settings.
  const std::string rttm = read(ours);
  ASSERT_NE(rttm.find("SPEAKER talk 1 "), std::string::npos) << rttm;
  EXPECT_EQ(talk["turns_rttm"].get<std::string>(), rttm);
  // Its DER components are the scorer's (what earshot-der prints) on that file.
  const std::vector<SpeakerSegment> truth = read_rttm(dir_ / "data/talk.rttm");
  const std::vector<SpeakerSegment> hypothesis = read_rttm(ours);
  const DerScore at_collar = score_der(truth, hypothesis, {.collar = 0.25, .score_overlap = true, .uem = {}});
  const DerScore no_collar = score_der(truth, hypothesis, {.collar = 0.0, .score_overlap = true, .uem = {}});
  EXPECT_NEAR(at_collar.scored_speaker, 26.34, 0.005);  // the conversation's (docs/diarization-scoring.md)
  expect_components(talk["der"], at_collar, 0.25);
  expect_components(talk["der_no_collar"], no_collar, 0.0);
  expect_der_tool(talk["der"], dir_ / "data/talk.rttm", ours, 0.25);
  expect_der_tool(talk["der_no_collar"], dir_ / "data/talk.rttm", ours, 0.0);
  EXPECT_EQ(talk["truth"], (dir_ / "data/talk.rttm").string());
  // One clip scored: the totals are its own.
  EXPECT_EQ(d["scored_clips"], 1);
  // No clip has an STM: no cpWER.
  EXPECT_EQ(d["cpwer_clips"], 0);
  EXPECT_TRUE(d["cpwer"].is_null());
  EXPECT_TRUE(talk["cpwer"].is_null());
  expect_components(d["der"], at_collar, 0.25);
  expect_components(d["der_no_collar"], no_collar, 0.0);

  // The clip without a truth: its compute, no DER, and a note saying why.
  EXPECT_TRUE(good["truth"].is_null());
  EXPECT_TRUE(good["der"].is_null());
  EXPECT_EQ(good["note"], "no RTTM truth: compute only");
  EXPECT_GT(good["compute_wall_seconds"].get<double>(), 0.0);
  EXPECT_GT(good["rtf_wall"].get<double>(), 0.0);
  // The stage's compute over both clips, apart from the ASR's.
  const double audio = j["config"]["utterances"][0]["audio_seconds"].get<double>() +
                       j["config"]["utterances"][1]["audio_seconds"].get<double>();
  EXPECT_NEAR(d["audio_seconds"].get<double>(), audio, 1e-3);
  EXPECT_NEAR(d["compute_wall_seconds"].get<double>(),
              good["compute_wall_seconds"].get<double>() + talk["compute_wall_seconds"].get<double>(), 1e-4);
  EXPECT_GT(d["rtf_wall"].get<double>(), 0.0);
  EXPECT_GT(d["cpu_seconds"].get<double>(), 0.0);
  EXPECT_NE(d["detail"].get<std::string>().find("chunk 1600 ms"), std::string::npos);

  EXPECT_NE(bench.output.find("good: no RTTM truth"), std::string::npos) << bench.output;
  EXPECT_NE(bench.output.find("1 of 2 clip(s) have no RTTM truth"), std::string::npos) << bench.output;
  const std::string markdown = read(md);
  EXPECT_NE(markdown.find("### Diarization: alignatt"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| good | no RTTM truth"), std::string::npos) << markdown;
  EXPECT_NE(bench.output.find("no clip has an STM transcript"), std::string::npos) << bench.output;
}

TEST_F(BenchDiarizationCli, CpwerIsTheScorersOnTranscribesWordsAndSpeakers) {
  // transcribe's words with their speakers for the conversation.
  const fs::path words_json = dir_ / "words.json";
  const auto transcribe = run_command(std::string(EARSHOT_BIN) + " transcribe" + models() + " --format json --output " +
                                      words_json.string() + " " + (dir_ / "data/talk.wav").string());
  ASSERT_EQ(transcribe.status, 0) << transcribe.output;
  const nlohmann::json transcript = nlohmann::json::parse(read(words_json));
  std::vector<Word> words;
  for (const nlohmann::json& w : transcript["words"]) {
    Word word;
    word.text = w["text"].get<std::string>();
    word.start = w["start"].get<double>();
    word.end = w["end"].get<double>();
    word.speaker = w.value("speaker", -1);
    words.push_back(word);
  }
  ASSERT_FALSE(words.empty());
  // A speaker-labelled reference that is those words, each run of one speaker
  // a segment, speaker k named "ref<k>" (the words without one "nobody").
  const fs::path data = dir_ / "stm";
  fs::create_directories(data);
  fs::copy_file(dir_ / "data/talk.wav", data / "talk.wav");
  std::ofstream(data / "talk.txt") << "and so my fellow americans";
  {
    std::ofstream stm(data / "talk.stm");
    stm << ";; transcribe's words as the reference\n";
    for (size_t i = 0; i < words.size();) {
      size_t j = i;
      std::string text;
      while (j < words.size() && words[j].speaker == words[i].speaker) text += words[j++].text;
      stm << "talk 1 " << (words[i].speaker > 0 ? "ref" + std::to_string(words[i].speaker) : "nobody") << " "
          << words[i].start << " " << words[j - 1].end << " " << text << "\n";
      i = j;
    }
  }
  const fs::path json = dir_ / "stm.json", md = dir_ / "stm.md";
  const auto bench = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + data.string() + models() +
                                 " --json " + json.string() + " --markdown " + md.string());
  ASSERT_EQ(bench.status, 0) << bench.output;
  const nlohmann::json j = nlohmann::json::parse(read(json));
  const nlohmann::json& d = j["systems"][0]["diarization"];
  ASSERT_EQ(d["clips"].size(), 1u);
  const nlohmann::json& c = d["clips"][0]["cpwer"];
  ASSERT_TRUE(c.is_object()) << d.dump();
  EXPECT_EQ(d["clips"][0]["word_truth"], (data / "talk.stm").string());

  // The scorer's on the same words and STM.
  const CpwerScore expected = score_cpwer_words(read_stm(data / "talk.stm"), words, NormalizerKind::kEnglish);
  EXPECT_GT(expected.words.reference, 0);
  EXPECT_EQ(c["reference_words"].get<long>(), expected.words.reference);
  EXPECT_EQ(c["substitutions"].get<long>(), expected.words.substitutions);
  EXPECT_EQ(c["deletions"].get<long>(), expected.words.deletions);
  EXPECT_EQ(c["insertions"].get<long>(), expected.words.insertions);
  // Each reference speaker is one of the stage's: nothing is wrong, ref<k> is S<k>.
  EXPECT_EQ(c["errors"], 0);
  EXPECT_EQ(c["cpwer_percent"].get<double>(), 0.0);
  for (const nlohmann::json& pair : c["mapping"]) {
    const std::string ref = pair[0].get<std::string>(), hyp = pair[1].get<std::string>();
    EXPECT_EQ(ref == "nobody" ? "(none)" : "S" + ref.substr(3), hyp) << c.dump();
  }
  EXPECT_EQ(d["cpwer_clips"], 1);
  EXPECT_EQ(d["cpwer"]["reference_words"], c["reference_words"]);
  EXPECT_NE(bench.output.find("talk: cpWER 0.00% (S 0, D 0, I 0 of " + std::to_string(expected.words.reference) +
                              " reference words"),
            std::string::npos)
      << bench.output;
  EXPECT_NE(read(md).find("| talk | 0.00 | 0 | 0 | 0 | " + std::to_string(expected.words.reference) + " |"),
            std::string::npos)
      << read(md);
}

TEST_F(BenchDiarizationCli, ACapacityRunDiarizesEverySessionLive) {
  const fs::path data = dir_ / "capacity";
  fs::create_directories(data);
  fs::copy_file(dir_ / "data/good.wav", data / "good.wav");
  std::ofstream(data / "good.txt") << "he was not an ill disposed young man";
  const fs::path json = dir_ / "capacity.json", md = dir_ / "capacity.md";
  // The reference workload commits the reference's words, so the stage has words to name.
  const auto r = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + data.string() + models() +
                             " --workload reference --vad-model " + EARSHOT_SHARED_DIR +
                             "/models/silero-v6.2.0-ggml.bin --capacity --sessions 1 --workers 1 "
                             "--diarization-workers 1 --json " +
                             json.string() + " --markdown " + md.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(read(json));
  // The diarization limit: the source's 1.6 s chunk + the ASR's 1 s lag limit; the rule names it.
  EXPECT_NEAR(j["config"]["diarization_lag_limit"].get<double>(), 2.6, 1e-9);
  EXPECT_NE(j["config"]["pass_rule"].get<std::string>().find(
                "its diarization p95 lag under 2.60 s and no diarization audio dropped"),
            std::string::npos)
      << j["config"].dump();
  ASSERT_EQ(j["runs"].size(), 1u);
  const nlohmann::json& run = j["runs"][0];
  ASSERT_EQ(run["per_session"].size(), 1u);
  EXPECT_EQ(run["per_session"][0]["error"], "");
  const nlohmann::json& s = run["per_session"][0]["diarization"];
  ASSERT_TRUE(s.is_object()) << run.dump();
  // The stage heard the whole stream (pauses included) and dropped none of it.
  EXPECT_NEAR(s["audio_seconds"].get<double>(), run["per_session"][0]["audio_seconds"].get<double>(), 1e-3);
  EXPECT_EQ(s["dropped_seconds"].get<double>(), 0.0);
  EXPECT_GE(s["p95_lag"].get<double>(), 0.0);
  EXPECT_GE(s["max_lag"].get<double>(), s["p95_lag"].get<double>());
  EXPECT_GT(s["compute_seconds"].get<double>(), 0.0);
  // Every committed word got its speaker, at or after its commit.
  EXPECT_GT(s["committed_words"].get<long>(), 0);
  EXPECT_EQ(s["speaker_delay_words"], s["committed_words"]);
  EXPECT_GE(s["speaker_delay_p50"].get<double>(), 0.0);
  EXPECT_GE(s["speaker_delay_p95"].get<double>(), s["speaker_delay_p50"].get<double>());
  // The run's figures are its one session's.
  const nlohmann::json& d = run["diarization"];
  ASSERT_TRUE(d.is_object()) << run.dump();
  EXPECT_EQ(d["p95_lag_max"], s["p95_lag"]);
  EXPECT_EQ(d["dropped_seconds"].get<double>(), 0.0);
  EXPECT_EQ(d["committed_words"], s["committed_words"]);
  EXPECT_EQ(d["speaker_delay_p50"], s["speaker_delay_p50"]);
  EXPECT_GT(d["compute_per_audio_second"].get<double>(), 0.0);
  // Within: the ASR's rule and the diarization's (whether it holds depends on the machine).
  const bool within = run["p95_lag_max"].get<double>() < 1.0 && run["skipped_seconds"].get<double>() == 0 &&
                      d["p95_lag_max"].get<double>() < 2.6;
  EXPECT_EQ(run["within_lag_limit"].get<bool>(), within);

  EXPECT_NE(r.output.find("within 1 s, diarization 2.6 s, 0 dropped"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  diarization: p95 lag "), std::string::npos) << r.output;
  const std::string markdown = read(md);
  EXPECT_NE(markdown.find("| speaker delay p50 s | speaker delay p95 s |"), std::string::npos) << markdown;
}

TEST_F(BenchDiarizationCli, UnusableSetupsAreRefusedWithTheReason) {
  const fs::path bad = dir_ / "bad";
  fs::create_directories(bad);
  fs::copy_file(dir_ / "data/good.wav", bad / "good.wav");
  std::ofstream(bad / "good.txt") << "he was not an ill disposed young man";
  std::ofstream(bad / "good.rttm") << "SPEAKER one 1 0 1 <NA> <NA> A <NA> <NA>\n"
                                      "SPEAKER two 1 0 1 <NA> <NA> A <NA> <NA>\n";
  auto r = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + bad.string() + models());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find((bad / "good.rttm").string() + ": the RTTM truth of"), std::string::npos) << r.output;
  // A malformed STM names the file and line.
  fs::remove(bad / "good.rttm");
  std::ofstream(bad / "good.stm") << ";; a comment\ngood 1 A 0.5 zero hello\n";
  r = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + bad.string() + models());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find((bad / "good.stm").string() + ":2: end time 'zero' is not a number of seconds"),
            std::string::npos)
      << r.output;

  r = run_command(std::string(EARSHOT_BIN) + " bench --dataset " + (dir_ / "data").string() + " --model " +
                  (dir_ / "asr.bin").string() + " --max-speakers 2");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--max-speakers needs --diarization-model"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace earshot::bench

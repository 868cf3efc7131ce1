// End-to-end smoke runs of `earshot bench` on shared/data/librivox with a
// generated random-weight model: the numbers are meaningless, but the run
// must complete and every metric must be present and within sane bounds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/command.h"
#include "bench/dataset.h"
#include "bench/normalizer.h"
#include "bench/runner.h"
#ifdef EARSHOT_BASELINE_BIN
#include "bench/whispercpp_stream.h"
#endif

namespace earshot::bench {
namespace {
namespace fs = std::filesystem;

using Result = earshot::testing::CommandResult;
const auto run = earshot::testing::run_command;

class BenchSmoke : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("earshot-bench-smoke-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_ = dir_ / "mini-en-f16.bin";
    // Small dimensions (and a short text context: random weights never emit
    // EOT, so every decode runs to its limit) keep the run short; f16 because
    // libwhisper rejects all-f32 files.
    const Result r = run(std::string(EARSHOT_MAKE_MODEL) + " --template " + EARSHOT_SHARED_DIR +
                         "/models/for-tests-ggml-tiny.en.bin --out " + model_.string() +
                         " --type f16 --seed 3 --n-state 64 --n-head 2 --n-layer 2 --n-text-ctx 128");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  // A dataset folder dir_/NAME of one LibriVox clip and its reference.
  static fs::path one_clip_dataset(const std::string& name) {
    const fs::path one = dir_ / name;
    fs::create_directories(one);
    fs::copy_file(std::string(EARSHOT_SHARED_DIR) + "/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
                  one / "good.wav", fs::copy_options::overwrite_existing);
    std::ofstream(one / "good.txt") << "he was not an ill disposed young man";
    return one;
  }
  // A small cache-aware streaming transducer (Nemotron layout), generated once for the suite.
  static fs::path streaming_transducer() {
    const fs::path nemotron = dir_ / "nemotron-small.gguf";
    if (!fs::exists(nemotron)) {
      const Result r = run(std::string(EARSHOT_MAKE_PARAKEET) + " --streaming 1 --seed 3 --gguf " + nemotron.string());
      EXPECT_EQ(r.status, 0) << r.output;
    }
    return nemotron;
  }
  static fs::path dir_, model_;
};
fs::path BenchSmoke::dir_, BenchSmoke::model_;

void expect_sane_distribution(const nlohmann::json& d, double lo, double hi, const std::string& what) {
  ASSERT_TRUE(d["count"].is_number()) << what;
  // Every system commits words on this dataset: an empty sample means the metric broke.
  ASSERT_GT(d["count"].get<long>(), 0) << what;
  for (const char* k : {"min", "mean", "median", "p90", "max"}) {
    ASSERT_TRUE(d[k].is_number()) << what << "." << k;
    EXPECT_GE(d[k].get<double>(), lo) << what << "." << k;
    EXPECT_LE(d[k].get<double>(), hi) << what << "." << k;
  }
  EXPECT_LE(d["min"].get<double>(), d["median"].get<double>()) << what;
  EXPECT_LE(d["median"].get<double>(), d["p90"].get<double>()) << what;
  EXPECT_LE(d["p90"].get<double>(), d["max"].get<double>()) << what;
}

TEST_F(BenchSmoke, LibrivoxRunHasEveryMetric) {
  const fs::path json = dir_ / "out.json", md = dir_ / "out.md", svg = dir_ / "out.svg";
  const std::string dataset = std::string(EARSHOT_SHARED_DIR) + "/data/librivox";
  std::string command = std::string(EARSHOT_BIN) + " bench --dataset " + dataset + " --model " + model_.string() +
                        " --policy alignatt,localagreement --threads 1 --chunk 1 --encoder-input audio --json " +
                        json.string() + " --markdown " + md.string() + " --plot " + svg.string();
  size_t expected_systems = 2;
#ifdef EARSHOT_BASELINE_BIN
  command += " --baseline whispercpp-stream --baseline-no-fallback --baseline-binary " EARSHOT_BASELINE_BIN;
  expected_systems = 3;
#endif
  const Result r = run(command);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("WER%"), std::string::npos) << r.output;

  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  const Dataset d = load_dataset(dataset);
  long reference_words = 0;
  double audio_seconds = 0;
  for (const Utterance& u : d.utterances)
    reference_words += static_cast<long>(split_words(normalize_text(u.reference, NormalizerKind::kEnglish)).size());
  ASSERT_EQ(j["config"]["utterances"].size(), 5u);
  for (const auto& u : j["config"]["utterances"]) audio_seconds += u["audio_seconds"].get<double>();
  EXPECT_NEAR(audio_seconds, 24.73, 1e-6);
  ASSERT_EQ(j["systems"].size(), expected_systems);
  for (const auto& s : j["systems"]) {
    const std::string name = s["name"];
    SCOPED_TRACE(name);
    EXPECT_EQ(s["failed_streams"], 0);
    EXPECT_EQ(s["wer"]["reference"].get<long>(), reference_words);
    // The rate is the errors over the reference words (JSON keeps 6 significant digits).
    const double rate = static_cast<double>(s["wer"]["errors"].get<long>()) / static_cast<double>(reference_words);
    EXPECT_NEAR(s["wer"]["rate"].get<double>(), rate, 1e-5 * std::max(1.0, rate));
    EXPECT_EQ(
        s["wer"]["errors"].get<long>(),
        s["wer"]["substitutions"].get<long>() + s["wer"]["deletions"].get<long>() + s["wer"]["insertions"].get<long>());
    EXPECT_GT(s["cer"]["reference"].get<long>(), reference_words);
    // As fast as possible: delays on the audio clock lie within the longest file.
    expect_sane_distribution(s["delay"], 0.0, 8.0, "delay");
    expect_sane_distribution(s["provisional_delay"], -8.0, 8.0, "provisional_delay");
    expect_sane_distribution(s["first_word_delay"], 0.0, 8.0, "first_word_delay");
    EXPECT_EQ(s["delay"]["values"].size(), s["delay"]["count"].get<size_t>());
    EXPECT_NEAR(s["audio_seconds"].get<double>(), audio_seconds, 1e-6);
    EXPECT_GT(s["compute_wall_seconds"].get<double>(), 0.0);
    EXPECT_GT(s["elapsed_wall_seconds"].get<double>(), 0.0);
    EXPECT_GT(s["cpu_seconds"].get<double>(), 0.0);
    EXPECT_GT(s["rtf_cpu"].get<double>(), 0.0);
    EXPECT_GT(s["rtf_wall"].get<double>(), 0.0);
    EXPECT_GT(s["peak_rss_bytes"].get<double>(), 4e6);
    EXPECT_LT(s["peak_rss_bytes"].get<double>(), 16e9);
    EXPECT_TRUE(s["compute"]["available"].get<bool>());
    EXPECT_GT(s["compute"]["encoder_passes"].get<long>(), 0);
    EXPECT_GT(s["compute"]["encoder_ms_per_pass"].get<double>(), 0.0);
    EXPECT_GT(s["compute"]["decoder_ms_per_pass"].get<double>(), 0.0);
    EXPECT_GT(s["compute"]["passes_per_audio_second"].get<double>(), 0.0);
    // At most one pass per process()/finish() call; warmup() is not counted.
    size_t calls = 0;
    for (const auto& f : s["files"]) calls += f["emissions"].size();
    EXPECT_LE(s["compute"]["passes_per_audio_second"].get<double>(), calls / audio_seconds + 1e-9);
    ASSERT_EQ(s["sessions"].size(), 1u);
    ASSERT_EQ(s["files"].size(), 5u);
    for (const auto& f : s["files"]) {
      SCOPED_TRACE(f["id"].get<std::string>());
      EXPECT_TRUE(f["error"].is_null());
      const double dur = f["audio_seconds"].get<double>();
      // One emission per 1 s chunk plus finish().
      EXPECT_EQ(f["emissions"].size(), static_cast<size_t>(std::ceil(dur - 1e-9)) + 1);
      double last_audio = 0;
      for (const auto& e : f["emissions"]) {
        EXPECT_GE(e[1].get<double>(), last_audio);
        last_audio = e[1].get<double>();
      }
      EXPECT_NEAR(last_audio, dur, 1e-6);
      if (f["first_word_delay"].is_number()) {
        EXPECT_LE(f["first_word_provisional_delay"].get<double>(), f["first_word_delay"].get<double>() + 1e-9);
        EXPECT_GE(f["time_to_first_commit"].get<double>(), 0.0);
        EXPECT_LE(f["time_to_first_commit"].get<double>(), dur + 1e-9);
      }
    }
  }
  std::stringstream markdown;
  markdown << std::ifstream(md).rdbuf();
  EXPECT_NE(markdown.str().find("| alignatt |"), std::string::npos);
  EXPECT_NE(markdown.str().find("| localagreement |"), std::string::npos);
  std::stringstream plot;
  plot << std::ifstream(svg).rdbuf();
  EXPECT_NE(plot.str().find("alignatt committed"), std::string::npos);
  EXPECT_NE(plot.str().find("</svg>"), std::string::npos);
}

TEST_F(BenchSmoke, BadDatasetsGetClearMessages) {
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  Result r = run(std::string(EARSHOT_BIN) + " bench --dataset " + empty.string() + " --model " + model_.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no usable utterance"), std::string::npos) << r.output;

  // One unreadable audio file, one without a reference, one good file: the run continues.
  const fs::path mixed = dir_ / "mixed";
  fs::create_directories(mixed);
  std::ofstream(mixed / "broken.wav") << "this is not audio";
  std::ofstream(mixed / "broken.txt") << "nothing";
  std::ofstream(mixed / "lonely.wav") << "no reference";
  fs::copy_file(std::string(EARSHOT_SHARED_DIR) + "/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
                mixed / "good.wav");
  std::ofstream(mixed / "good.txt") << "he was not an ill disposed young man";
  const fs::path json = dir_ / "mixed.json";
  r = run(std::string(EARSHOT_BIN) + " bench --dataset " + mixed.string() + " --model " + model_.string() +
          " --threads 1 --chunk 1 --encoder-input audio --json " + json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("broken.wav"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lonely.wav"), std::string::npos) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["dataset_problems"].size(), 2u);
  ASSERT_EQ(j["config"]["utterances"].size(), 1u);
  EXPECT_EQ(j["config"]["utterances"][0]["id"], "good");
  EXPECT_EQ(j["systems"][0]["wer"]["reference"], 8);
}

// Whisper + AlignAtt and a streaming transducer side by side on the same audio:
// each model runs the listed policies it has, --lookahead-ms reaches the transducer only.
TEST_F(BenchSmoke, WhisperAndAStreamingTransducerSideBySide) {
  const fs::path one = one_clip_dataset("one");
  const fs::path nemotron = streaming_transducer();
  ASSERT_TRUE(fs::exists(nemotron));
  const fs::path json = dir_ / "side.json";
  Result r = run(std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " + model_.string() + "," +
                 nemotron.string() + " --policy alignatt,native --lookahead-ms 560 --threads 1 --chunk 0.5 --json " +
                 json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["systems"].size(), 2u);
  EXPECT_EQ(j["systems"][0]["name"], "alignatt (mini-en-f16)");
  EXPECT_EQ(j["systems"][1]["name"], "native (nemotron-small)");
  for (const auto& s : j["systems"]) {
    EXPECT_EQ(s["failed_streams"], 0) << s["name"];
    EXPECT_EQ(s["wer"]["reference"], 8) << s["name"];
  }
  // Alone, a Whisper model still refuses the transducer's option.
  r = run(std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " + model_.string() +
          " --lookahead-ms 560 --threads 1");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--lookahead-ms 560 applies to cache-aware streaming transducers"), std::string::npos)
      << r.output;
}

// --capacity keeps what it measured: --json has every run with its sessions and
// profile, --markdown a row per run; options it cannot honour are refused.
TEST_F(BenchSmoke, CapacityRunWritesJsonAndMarkdown) {
  const fs::path one = one_clip_dataset("capacity");
  const std::string base = std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " +
                           model_.string() + " --workload reference --vad-model " + EARSHOT_SHARED_DIR +
                           "/models/silero-v6.2.0-ggml.bin --capacity --workers 1 --threads 1 --encoder-input audio";
  const fs::path json = dir_ / "capacity.json", markdown = dir_ / "capacity.md";
  Result r = run(base + " --sessions 1 --profile --max-buffered-seconds 20 --json " + json.string() + " --markdown " +
                 markdown.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["config"]["max_buffered_seconds"], 20);
  ASSERT_EQ(j["runs"].size(), 1u);
  const nlohmann::json& run1 = j["runs"][0];
  EXPECT_EQ(run1["system"], "alignatt");
  EXPECT_EQ(run1["sessions"], 1);
  EXPECT_EQ(run1["workers"], 1);
  EXPECT_EQ(run1["threads"], 1);
  ASSERT_EQ(run1["per_session"].size(), 1u);
  EXPECT_NEAR(run1["per_session"][0]["audio_seconds"].get<double>(), 95680.0 / 32000, 0.01);
  EXPECT_EQ(run1["per_session"][0]["error"], "");
  ASSERT_TRUE(run1["profile"].is_object());
  EXPECT_GT(run1["profile"]["encoder_passes"].get<long>(), 0);
  EXPECT_GT(run1["profile"]["compute_rtf"].get<double>(), 0);
  EXPECT_TRUE(j["capacity"].empty());  // fixed N: no search
  // The lag limit is the chunk + 0.5 s: 1 s at the default 0.5 s chunk.
  EXPECT_EQ(j["config"]["lag_limit"], 1.0);
  EXPECT_NE(r.output.find("within 1 s"), std::string::npos) << r.output;
  EXPECT_TRUE(run1["batching"].is_null());  // --batch-decode 0: no batching
  std::ifstream md(markdown);
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("| alignatt | 1 | 1 x 1 | 0 | "), std::string::npos) << text;

  r = run(base + " --sessions 1 --plot " + (dir_ / "x.svg").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--plot draws word delays"), std::string::npos) << r.output;
  r = run(base + " --sessions 1 --max-buffered-seconds 5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--max-buffered-seconds must be 0 (unbounded) or at least 10"), std::string::npos)
      << r.output;
  r = run(base + " --sessions 1 --lag-limit 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--lag-limit must be > 0 seconds"), std::string::npos) << r.output;
  r = run(std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " + model_.string() +
          " --lag-limit 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--lag-limit goes with --capacity"), std::string::npos) << r.output;
}

// A cache-aware streaming transducer (--policy native) through the capacity
// pipeline, two sessions batched across streams (--batch-decode 2): the runs
// complete, the lag limit follows the chunk (0.25 + 0.5 s), and the engine's
// batching over the run is reported.
TEST_F(BenchSmoke, AStreamingTransducerCapacityRunReportsItsBatching) {
  const fs::path one = one_clip_dataset("capacity-transducer");
  const fs::path nemotron = streaming_transducer();
  ASSERT_TRUE(fs::exists(nemotron));
  const fs::path json = dir_ / "capacity-transducer.json";
  Result r = run(std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " + nemotron.string() +
                 " --policy native --vad-model " + EARSHOT_SHARED_DIR +
                 "/models/silero-v6.2.0-ggml.bin --capacity --sessions 2 --workers 2 --threads 1 --batch-decode 2 "
                 "--chunk 0.25 --json " +
                 json.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("within 0.75 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("batched steps: "), std::string::npos) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_DOUBLE_EQ(j["config"]["lag_limit"].get<double>(), 0.75);
  ASSERT_EQ(j["runs"].size(), 1u);
  const nlohmann::json& run2 = j["runs"][0];
  EXPECT_EQ(run2["system"], "native");
  EXPECT_EQ(run2["sessions"], 2);
  ASSERT_EQ(run2["per_session"].size(), 2u);
  for (const auto& f : run2["per_session"]) EXPECT_EQ(f["error"], "");
  ASSERT_TRUE(run2["batching"].is_object()) << run2.dump();
  // Every stream step of the run went through the batcher, in at most as many graphs.
  EXPECT_GT(run2["batching"]["steps"].get<long>(), 0);
  EXPECT_LE(run2["batching"]["graphs"].get<long>(), run2["batching"]["steps"].get<long>());
  EXPECT_GE(run2["batching"]["max_batch_since_load"].get<long>(), 1);
  EXPECT_LE(run2["batching"]["max_batch_since_load"].get<long>(), 2);
}

// --profile with a transducer: its engine reports its model passes (encoder
// steps or stretches, greedy decoding), so the encoder has its own share of the
// compute instead of all of it showing as policy: the streaming model batched
// across two sessions, and an offline one (native: a pass per window).
TEST_F(BenchSmoke, ATransducerCapacityProfileShowsItsEncoderAndDecoder) {
  const fs::path one = one_clip_dataset("capacity-transducer-profile");
  const fs::path nemotron = streaming_transducer();
  const fs::path parakeet = dir_ / "parakeet-small.gguf";
  Result r = run(std::string(EARSHOT_MAKE_PARAKEET) + " --seed 3 --gguf " + parakeet.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string vad = std::string(" --vad-model ") + EARSHOT_SHARED_DIR + "/models/silero-v6.2.0-ggml.bin";
  const struct {
    fs::path model;
    std::string options;
  } cases[] = {{nemotron, " --sessions 2 --batch-decode 2 --chunk 0.25"}, {parakeet, " --sessions 1 --chunk 0.5"}};
  for (const auto& c : cases) {
    const fs::path json = dir_ / ("profile-" + c.model.stem().string() + ".json");
    r = run(std::string(EARSHOT_BIN) + " bench --dataset " + one.string() + " --model " + c.model.string() +
            " --policy native" + vad + " --capacity --workers 2 --threads 1 --profile" + c.options + " --json " +
            json.string());
    ASSERT_EQ(r.status, 0) << r.output;
    std::ifstream in(json);
    const nlohmann::json j = nlohmann::json::parse(in);
    ASSERT_EQ(j["runs"].size(), 1u) << c.model;
    for (const auto& f : j["runs"][0]["per_session"]) EXPECT_EQ(f["error"], "") << c.model;
    const nlohmann::json& p = j["runs"][0]["profile"];
    ASSERT_TRUE(p.is_object()) << c.model;
    EXPECT_GT(p["encoder_passes"].get<long>(), 0) << c.model;
    EXPECT_GT(p["decoder_calls"].get<long>(), 0) << c.model;
    EXPECT_GT(p["ms_per_audio_second"]["encoder"].get<double>(), 0) << c.model;
    EXPECT_GT(p["ms_per_audio_second"]["decoder"].get<double>(), 0) << c.model;
    EXPECT_GT(p["encoder_share"].get<double>(), 0) << c.model;
    EXPECT_LT(p["encoder_share"].get<double>(), 1) << c.model;
  }
}

#ifdef EARSHOT_BASELINE_BIN
// The stream.cpp schedule: a decode every 3 s of new audio, a finished line
// (commit) every second step, the rest committed by finish().
TEST_F(BenchSmoke, WhisperCppStreamCommitsFinishedLinesOnly) {
  WhisperCppStreamOptions o;
  o.model_path = model_.string();
  o.threads = 1;
  o.no_fallback = true;
  StreamHandle h = make_whispercpp_stream(o);
  std::vector<float> audio(14 * 16000);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = 0.1f * std::sin(0.05f * static_cast<float>(i));
  SteadyClock clock;
  StreamOptions so;
  so.warmup = false;
  const StreamTrace t = run_stream(*h.processor, audio, so, clock);
  ASSERT_EQ(t.emissions.size(), 29u);  // 28 chunks + finish
  for (size_t k = 0; k + 1 < t.emissions.size(); ++k) {
    const Emission& e = t.emissions[k];
    const bool line_end = std::fabs(e.audio - 6.0) < 1e-9 || std::fabs(e.audio - 12.0) < 1e-9;
    if (!line_end) {
      EXPECT_EQ(e.committed, 0) << "at audio " << e.audio;
    } else {
      EXPECT_EQ(e.provisional, 0) << "a finished line leaves nothing provisional";
    }
  }
  EXPECT_EQ(t.emissions.back().provisional, 0);
  const ComputeStats stats = h.stats();
  EXPECT_EQ(stats.encoder_passes, 5);  // steps at 3, 6, 9, 12 s and the final 2 s
  for (const CommittedWord& w : t.words) {
    EXPECT_LE(w.word.end, w.commit_audio + 1e-9);
    EXPECT_GE(w.word.start, 0.0);
  }
}
#endif

}  // namespace
}  // namespace earshot::bench

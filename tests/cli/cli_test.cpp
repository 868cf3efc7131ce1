// Runs the `earshot` binary as a user would. The model is a small random-weight
// one (what it says is noise), so the checks are about the contract: exit codes,
// messages that name the problem, formats that agree with each other, events
// whose committed words add up to the final transcript, determinism.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/fastconformer/random_model.h"
#include "model/llm/random_llm.h"
#include "model/whisper/model_format.h"
#include "model/whisper/model_writer.h"

namespace earshot::cli {
namespace {
namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("earshot-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    whisper::RandomModelSpec spec;
    spec.template_path = fs::path(EARSHOT_SHARED_DIR) / "models/for-tests-ggml-tiny.en.bin";
    spec.vocab_tiktoken = fs::path(EARSHOT_SHARED_DIR) / "models/whisper-gpt2.tiktoken";
    spec.hparams = whisper::read_file_header(spec.template_path).hparams;
    spec.hparams.n_audio_state = spec.hparams.n_text_state = 64;
    spec.hparams.n_audio_head = spec.hparams.n_text_head = 2;
    spec.hparams.n_audio_layer = 1;
    spec.hparams.n_text_layer = 2;
    spec.weight_type = GGML_TYPE_F32;
    spec.seed = 7;
    model_ = dir_ / "model.bin";
    whisper::write_random_model(spec, model_);
    audio_ = fs::path(EARSHOT_SHARED_DIR) / "data/jfk.wav";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static Outcome earshot(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command =
        std::string(EARSHOT_BIN) + " " + args + " >" + out.string() + " 2>" + err.string() + " </dev/null";
    const int status = std::system(command.c_str());
    Outcome r;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
  }
  static std::string transcribe(const std::string& extra) {
    return "transcribe " + audio_.string() + " --model " + model_.string() + " --threads 1 --chunk 1 " + extra;
  }

  static fs::path dir_, model_, audio_;
};
fs::path Cli::dir_, Cli::model_, Cli::audio_;

TEST_F(Cli, VersionNamesGgmlAndTheCpuDevice) {
  const Outcome r = earshot("version");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("earshot ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("(ggml 0.25.1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndevice CPU: "), std::string::npos) << r.out;
  // The bootstrap installs OpenBLAS, which --cpu-kernels auto uses; the line names its core.
  EXPECT_NE(r.out.find("\ncpu kernels: OpenBLAS "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(core "), std::string::npos) << r.out;
  // Tests build only with FFmpeg (EARSHOT_FFMPEG=OFF requires EARSHOT_BUILD_TESTS=OFF).
  EXPECT_NE(r.out.find("\naudio: WAV, and every format FFmpeg decodes"), std::string::npos) << r.out;
}

TEST_F(Cli, NoCommandOrAnUnknownOneIsAUsageError) {
  const Outcome none = earshot("");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.out.find("usage: earshot <command>"), std::string::npos) << none.out;
  const Outcome unknown = earshot("transcrib");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE((unknown.out + unknown.err).find("transcrib"), std::string::npos);
}

TEST_F(Cli, TranscribeErrorsNameWhatIsWrong) {
  const Outcome no_audio = earshot("transcribe " + (dir_ / "missing.wav").string() + " --model " + model_.string());
  EXPECT_EQ(no_audio.status, 1);
  EXPECT_NE(no_audio.err.find("missing.wav: no such file"), std::string::npos) << no_audio.err;
  const Outcome no_model = earshot("transcribe " + audio_.string() + " --model " + (dir_ / "absent.bin").string());
  EXPECT_EQ(no_model.status, 1);
  EXPECT_NE(no_model.err.find("absent.bin does not exist"), std::string::npos) << no_model.err;
  const Outcome bad_format = earshot(transcribe("--format xml"));
  EXPECT_EQ(bad_format.status, 2);
  EXPECT_NE(bad_format.err.find("unknown --format 'xml'"), std::string::npos) << bad_format.err;
  const fs::path truncated = dir_ / "truncated.bin";
  {
    const std::string bytes = read_text(model_);
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  const Outcome bad_model = earshot("transcribe " + audio_.string() + " --model " + truncated.string());
  EXPECT_EQ(bad_model.status, 1);
  EXPECT_NE(bad_model.err.find("truncated"), std::string::npos) << bad_model.err;
}

// --threads and --beams are each checked by one function every command calls: the same message everywhere.
TEST_F(Cli, ThreadsAndBeamsAreCheckedAlikeByEveryCommand) {
  const std::string model = " --model " + model_.string();
  for (const std::string& command :
       {"transcribe " + audio_.string() + model + " --threads 0", "serve" + model + " --port 0 --threads 0",
        "bench --dataset " + (dir_ / "no-dataset").string() + model + " --threads 0"}) {
    const Outcome r = earshot(command);
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_NE(r.err.find("--threads must be >= 1"), std::string::npos) << command << ": " << r.err;
  }
  for (const std::string& command :
       {"transcribe " + audio_.string() + model + " --threads 1", "serve" + model + " --port 0 --no-vac --threads 1"}) {
    const Outcome r = earshot(command + " --policy localagreement --beams 2");
    EXPECT_EQ(r.status, 2) << command;
    EXPECT_NE(r.err.find("--beams applies to --policy alignatt only"), std::string::npos) << command << ": " << r.err;
  }
}

TEST_F(Cli, LookaheadIsCheckedAgainstAStreamingTransducer) {
  fastconformer::RandomModelOptions o;
  o.streaming = true;
  o.seed = 3;
  const fs::path model = dir_ / "nemotron-small.gguf";
  fastconformer::write_gguf(model, fastconformer::random_model(o));
  const std::string base = "transcribe " + audio_.string() + " --model " + model.string() + " --threads 1 ";
  const Outcome ok = earshot(base + "--lookahead-ms 160");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_FALSE(ok.out.empty());
  const Outcome bad = earshot(base + "--lookahead-ms 240");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("80 ms (0), 160 ms (1), 560 ms (6), 1120 ms (13)"), std::string::npos) << bad.err;
  o.streaming = false;
  const fs::path offline = dir_ / "parakeet-small.gguf";
  fastconformer::write_gguf(offline, fastconformer::random_model(o));
  const Outcome refused =
      earshot("transcribe " + audio_.string() + " --model " + offline.string() + " --lookahead-ms 160");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.err.find("is an offline model"), std::string::npos) << refused.err;
}

// --nemo-mel-frames takes NeMo's count or libparakeet's (tests/engine: it reaches the streams).
TEST_F(Cli, NemoMelFramesTakesNemoOrLibparakeet) {
  fastconformer::RandomModelOptions o;
  o.seed = 3;
  const fs::path model = dir_ / "parakeet-small.gguf";
  fastconformer::write_gguf(model, fastconformer::random_model(o));
  const std::string base = "transcribe " + audio_.string() + " --model " + model.string() + " --threads 1 ";
  const Outcome ok = earshot(base + "--nemo-mel-frames libparakeet");
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_FALSE(ok.out.empty());
  const Outcome bad = earshot(base + "--nemo-mel-frames hf");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--nemo-mel-frames must be nemo or libparakeet, not 'hf'"), std::string::npos) << bad.err;
}

// `earshot quantize IN OUT TYPE` writes a file transcribe reads and `earshot models`
// names (family, layout, quantisation); bad arguments are usage errors naming themselves.
TEST_F(Cli, QuantizeWritesAModelThatLoadsAndModelsNamesIt) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  const Outcome q = earshot("quantize " + model_.string() + " " + (cache / "model-q8_0.bin").string() + " q8_0");
  ASSERT_EQ(q.status, 0) << q.err;
  EXPECT_NE(q.out.find("Whisper (whisper.cpp ggml .bin): "), std::string::npos) << q.out;
  const Outcome t = earshot("transcribe " + audio_.string() + " --model " + (cache / "model-q8_0.bin").string() +
                            " --threads 1 --chunk 1");
  ASSERT_EQ(t.status, 0) << t.err;
  fastconformer::RandomModelOptions o;
  o.seed = 3;
  fastconformer::write_legacy(cache / "parakeet.bin", fastconformer::random_model(o));
  const Outcome m = earshot("models --cache-dir " + cache.string());
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.out.find("model-q8_0.bin                           Whisper                    whisper.cpp ggml .bin"
                       "        q8_0\n"),
            std::string::npos)
      << m.out;
  EXPECT_NE(m.out.find("parakeet.bin                             FastConformer transducer   whisper.cpp Parakeet .bin"
                       "    f32\n"),
            std::string::npos)
      << m.out;
  const Outcome type = earshot("quantize " + model_.string() + " " + (dir_ / "x.bin").string() + " q9_9");
  EXPECT_EQ(type.status, 2);
  EXPECT_NE(type.err.find("unknown type 'q9_9' (one of q4_0, q4_1, q5_0, q5_1, q8_0, q2_K"), std::string::npos)
      << type.err;
  const Outcome args = earshot("quantize " + model_.string());
  EXPECT_EQ(args.status, 2);
  EXPECT_NE(args.err.find("expected IN OUT TYPE"), std::string::npos) << args.err;
  EXPECT_FALSE(fs::exists(dir_ / "x.bin"));
}

// `earshot models` and `earshot pull` read every family's catalogue and every
// stage's (engine::Family::catalogue, stages::StageDefinition::catalogue).
TEST_F(Cli, ModelsAndPullKnowEveryFamilysAndStagesNames) {
  const fs::path cache = dir_ / "empty-cache";
  fs::create_directories(cache);
  const Outcome m = earshot("models --cache-dir " + cache.string());
  ASSERT_EQ(m.status, 0) << m.err;
  for (const char* name :
       {"tiny.en ", "parakeet-tdt-0.6b-v3-f16 ", "qwen3-asr-0.6b ",
        "transcribe.cpp/nemotron-3.5-asr-streaming-0.6b-q8_0 ", "transcribe.cpp/voxtral-mini-4b-realtime-2602-q4_k_m ",
        "\ndiarization models (--diarization-model NAME):\ntranscribe.cpp/diar_streaming_sortformer_4spk-v2.1-f32 "})
    EXPECT_NE(m.out.find(name), std::string::npos) << name << "\n" << m.out;
  const Outcome p = earshot("pull no-such-model --cache-dir " + cache.string());
  EXPECT_EQ(p.status, 2) << p.err;
  for (const char* name :
       {"unknown model 'no-such-model'", "large-v3-turbo-q8_0", "transcribe.cpp/voxtral-mini-4b-realtime-2602-bf16",
        "transcribe.cpp/diar_streaming_sortformer_4spk-v2.1-q8_0", "hy-mt2-1.8b-q4_k_m"})
    EXPECT_NE(p.err.find(name), std::string::npos) << name << "\n" << p.err;
}

TEST_F(Cli, DeviceOptionNamesTheDevicesThereAre) {
  const Outcome unknown = earshot(transcribe("--device NoSuchDevice9"));
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("--device NoSuchDevice9: no such device in this build (there are: CPU"), std::string::npos)
      << unknown.err;
  // auto falls back to the CPU when the build has no GPU: same words as --device cpu.
  const Outcome cpu = earshot(transcribe("--format json --device cpu"));
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  if (earshot("version").out.find("device CUDA") == std::string::npos) {
    const Outcome automatic = earshot(transcribe("--format json --device auto"));
    ASSERT_EQ(automatic.status, 0) << automatic.err;
    EXPECT_EQ(automatic.out, cpu.out);
    const Outcome by_default = earshot(transcribe("--format json"));  // --device auto
    ASSERT_EQ(by_default.status, 0) << by_default.err;
    EXPECT_EQ(by_default.out, cpu.out);
  }
}

TEST_F(Cli, FlashAttentionIsOnOrOff) {
  const Outcome bad = earshot(transcribe("--flash-attention yes"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--flash-attention must be on or off, not 'yes'"), std::string::npos) << bad.err;
  // Both encoders run; their words may differ only by rounding, so only success is asserted here
  // (the numeric closeness is SessionTest.FlashAttentionEncoderMatchesTheExplicitSoftmaxClosely).
  for (const char* value : {"on", "off"}) {
    const Outcome run = earshot(transcribe(std::string("--format json --flash-attention ") + value));
    EXPECT_EQ(run.status, 0) << value << ": " << run.err;
    EXPECT_NE(run.out.find("\"words\""), std::string::npos) << run.out;
  }
}

TEST_F(Cli, TraceWritesOnePassPerLineAndGuardsAndWindowAreChecked) {
  const fs::path trace = dir_ / "passes.jsonl";
  const Outcome run =
      earshot(transcribe("--policy alignatt --guards off --attention-window all --trace " + trace.string()));
  ASSERT_EQ(run.status, 0) << run.err;
  // jfk.wav is 11 s, fed in 1 s chunks: one pass per chunk and one at the end.
  const std::string text = read_text(trace);
  size_t lines = 0;
  for (size_t at = 0; (at = text.find("{\"pass\":" + std::to_string(lines) + ",", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_GE(lines, 11u) << text.substr(0, 400);
  EXPECT_NE(text.find("\"stop\":\""), std::string::npos);
  const Outcome bad_guards = earshot(transcribe("--guards maybe"));
  EXPECT_EQ(bad_guards.status, 2);
  EXPECT_NE(bad_guards.err.find("--guards must be on or off"), std::string::npos) << bad_guards.err;
  const Outcome bad_window = earshot(transcribe("--attention-window 0"));
  EXPECT_EQ(bad_window.status, 2);
  EXPECT_NE(bad_window.err.find("--attention-window must be all or a count >= 1"), std::string::npos) << bad_window.err;
  const Outcome window = earshot(transcribe("--attention-window 16 --format json"));
  EXPECT_EQ(window.status, 0) << window.err;
}

TEST_F(Cli, TranscribeFormatsAndEventsAgree) {
  const fs::path events = dir_ / "events.jsonl";
  const Outcome json_run = earshot(transcribe("--format json --events " + events.string()));
  ASSERT_EQ(json_run.status, 0) << json_run.err;
  const nlohmann::json doc = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(doc["language"], "en");
  const auto& words = doc["words"];
  ASSERT_FALSE(words.empty()) << json_run.out;
  std::string text;
  double previous_start = 0.0;
  for (const auto& w : words) {
    const double start = w["start"], end = w["end"];
    EXPECT_LE(previous_start, start);
    EXPECT_LE(start, end);
    EXPECT_LE(end, 11.01);  // jfk.wav lasts 11 s
    previous_start = start;
    text += w["text"].get<std::string>();
  }
  EXPECT_EQ(doc["text"], text.substr(text.find_first_not_of(' ')));

  // Each event line carries the words committed since the previous one.
  std::ifstream lines(events);
  nlohmann::json committed = nlohmann::json::array();
  double previous_audio = 0.0;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line);
    EXPECT_GE(event["audio_time"].get<double>(), previous_audio);
    previous_audio = event["audio_time"];
    for (const auto& w : event["committed"]) committed.push_back(w);
  }
  EXPECT_EQ(committed, words);

  const Outcome txt = earshot(transcribe("--format txt"));
  ASSERT_EQ(txt.status, 0) << txt.err;
  EXPECT_EQ(txt.out, doc["text"].get<std::string>() + "\n");
  const Outcome srt = earshot(transcribe("--format srt"));
  ASSERT_EQ(srt.status, 0) << srt.err;
  EXPECT_EQ(srt.out.rfind("1\n00:00:", 0), 0u) << srt.out;
  EXPECT_NE(srt.out.find(" --> "), std::string::npos);
  const Outcome vtt = earshot(transcribe("--format vtt"));
  ASSERT_EQ(vtt.status, 0) << vtt.err;
  EXPECT_EQ(vtt.out.rfind("WEBVTT\n", 0), 0u) << vtt.out;
}

TEST_F(Cli, TranscribeIsDeterministicAndWritesOutputFiles) {
  const fs::path out = dir_ / "out.json";
  const Outcome first = earshot(transcribe("--format json --output " + out.string()));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_TRUE(first.out.empty()) << first.out;
  const Outcome second = earshot(transcribe("--format json"));
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(read_text(out), second.out);
}

// --translation-model loads a GGUF LLM through libllama: a random hunyuan-dense
// model (with Qwen2's vocabulary) has no calibration entry, so translation runs
// per closed segment and every segment gets a translation; a file that is no
// LLM is refused with a message naming the flag.
TEST_F(Cli, TranslateToWithAGeneratedLlmTranslatesEverySegment) {
  llm::RandomLlmSpec spec;
  spec.architecture = "hunyuan-dense";
  spec.vocabulary = fs::path(EARSHOT_LLAMA_MODELS_DIR) / "ggml-vocab-qwen2.gguf";
  spec.hunyuan_control_tokens = true;
  const fs::path llm = dir_ / "translator.gguf";
  llm::write_random_llm(spec, llm);
  const Outcome run = earshot(transcribe("--format json --translate-to zh --translation-model " + llm.string()));
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j.contains("translation_segments")) << run.out;
  ASSERT_FALSE(j["translation_segments"].empty()) << run.out;
  for (const auto& segment : j["translation_segments"]) {
    EXPECT_FALSE(segment["source"].get<std::string>().empty());
    EXPECT_FALSE(segment["translation"].get<std::string>().empty()) << segment.dump();
  }

  const Outcome foreign = earshot(transcribe("--translate-to zh --translation-model " + model_.string()));
  EXPECT_NE(foreign.status, 0);
  EXPECT_NE(foreign.err.find("--translation-model " + model_.string()), std::string::npos) << foreign.err;
}

// An unknown --translation-attention route is refused naming the flag (what qk
// loads: translation_options_test; what it captures: earshot_llm_llama_test).
TEST_F(Cli, AnUnknownTranslationAttentionRouteIsRefused) {
  const Outcome bad = earshot(transcribe("--translate-to zh --translation-model " + (dir_ / "none.gguf").string() +
                                         " --translation-attention flash"));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--translation-attention"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("qk"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace earshot::cli

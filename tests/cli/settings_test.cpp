// The commands' settings read from a command line before anything loads: each
// refusal of a flag combination or range, with the message naming the flag, and
// an accepted command line's typed fields. The model and dataset paths given do
// not exist: reading the settings must not touch them.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "../model/error_of.h"
#include "cli/bench_settings.h"
#include "cli/serve_settings.h"
#include "cli/transcribe_settings.h"
#include "engine/whisper/options.h"

namespace earshot::cli {
namespace {

using earshot::testing::error_of;

template <class Settings>
Settings read(std::vector<std::string> argv, const char* command) {
  Args args(command, Settings::kUsage);
  Settings::declare(args);
  std::optional<Settings> s = Settings::parse(args, argv);
  if (!s) throw std::logic_error("--help printed");
  return std::move(*s);
}

BenchSettings bench(std::vector<std::string> extra) {
  std::vector<std::string> argv = {"--dataset", "no-such-dataset", "--model", "no-such-model.bin"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return read<BenchSettings>(argv, "bench");
}

// The message of the kInvalidArgument error reading `argv` throws.
template <class F>
std::string refusal(F&& read_settings) {
  const Error e = error_of([&] { read_settings(); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  return e.what();
}

std::string bench_refusal(std::vector<std::string> extra) {
  return refusal([&] { bench(extra); });
}

TEST(CliBenchSettings, PacingFlagsExcludeEachOther) {
  EXPECT_EQ(bench_refusal({"--realtime", "--as-fast-as-possible"}),
            "--realtime and --as-fast-as-possible exclude each other");
}

TEST(CliBenchSettings, ChunkMustBePositive) {
  EXPECT_EQ(bench_refusal({"--chunk", "0"}), "--chunk must be > 0 seconds");
  EXPECT_EQ(bench_refusal({"--chunk", "-0.5"}), "--chunk must be > 0 seconds");
}

TEST(CliBenchSettings, SessionsAndThreadsMustBeAtLeastOne) {
  EXPECT_EQ(bench_refusal({"--sessions", "0"}), "--sessions must be >= 1");
  EXPECT_EQ(bench_refusal({"--capacity", "--sessions", "1,0"}), "--sessions must be >= 1");
  EXPECT_EQ(bench_refusal({"--capacity", "--sessions", "abc"}),
            "--sessions takes auto, N or N1,N2,... with --capacity (got 'abc')");
  EXPECT_EQ(bench_refusal({"--capacity", "--sessions", "2,4x"}),
            "--sessions takes auto, N or N1,N2,... with --capacity (got '2,4x')");
  EXPECT_EQ(bench_refusal({"--threads", "0"}), "--threads must be >= 1");
}

TEST(CliBenchSettings, CapacityRefusesWhatItCannotMeasure) {
  EXPECT_EQ(bench_refusal({"--capacity", "--as-fast-as-possible"}),
            "--capacity runs in real time (drop --as-fast-as-possible)");
  EXPECT_EQ(bench_refusal({"--capacity", "--plot", "delays.svg"}),
            "--plot draws word delays, which --capacity does not measure (use --json or --markdown)");
  EXPECT_EQ(bench_refusal({"--capacity", "--baseline", "whispercpp-stream"}),
            "--capacity measures earshot's policies; drop --baseline");
}

TEST(CliBenchSettings, CapacityRanges) {
  EXPECT_EQ(bench_refusal({"--capacity", "--workers", "0"}), "--workers must be auto or 1..4096");
  EXPECT_EQ(bench_refusal({"--capacity", "--stop-passes", "maybe"}), "--stop-passes must be on or off, not 'maybe'");
  EXPECT_EQ(bench_refusal({"--capacity", "--max-sessions", "0"}), "--max-sessions must be >= 1");
  const std::string buffered =
      "--max-buffered-seconds must be 0 (unbounded) or at least 10 (the most audio one step takes)";
  EXPECT_EQ(bench_refusal({"--capacity", "--max-buffered-seconds", "5"}), buffered);
  EXPECT_EQ(bench_refusal({"--capacity", "--max-buffered-seconds", "-1"}), buffered);
  EXPECT_EQ(bench_refusal({"--capacity", "--lag-limit", "0"}), "--lag-limit must be > 0 seconds");
}

TEST(CliBenchSettings, CapacityOnlyFlagsNeedCapacity) {
  EXPECT_EQ(bench_refusal({"--profile"}), "--profile goes with --capacity (it needs the server's pipeline)");
  EXPECT_EQ(bench_refusal({"--lag-limit", "2"}), "--lag-limit goes with --capacity");
  EXPECT_EQ(bench_refusal({"--diarization-model", "sf.gguf", "--diarization-lag-limit", "5"}),
            "--diarization-lag-limit goes with --capacity");
  EXPECT_EQ(bench_refusal({"--diarization-model", "sf.gguf", "--diarization-workers", "2"}),
            "--diarization-workers goes with --capacity (without it each stream is diarized in order, after its ASR)");
}

TEST(CliBenchSettings, TheDiarizationLagLimitNeedsTheStage) {
  EXPECT_EQ(bench_refusal({"--capacity", "--diarization-lag-limit", "5"}),
            "--diarization-lag-limit needs --diarization-model PATH|NAME");
  EXPECT_EQ(bench_refusal({"--capacity", "--diarization-model", "sf.gguf", "--diarization-lag-limit", "0"}),
            "--diarization-lag-limit must be > 0 seconds");
  const BenchSettings s = bench(
      {"--capacity", "--diarization-model", "sf.gguf", "--diarization-lag-limit", "3.5", "--diarization-workers", "2"});
  ASSERT_TRUE(s.capacity);
  EXPECT_DOUBLE_EQ(s.capacity->diarization_lag_limit, 3.5);
  // Without the flag: 0, the source's chunk + the ASR's lag limit (bench_command.cpp, with the model's chunk).
  EXPECT_DOUBLE_EQ(bench({"--capacity", "--diarization-model", "sf.gguf"}).capacity->diarization_lag_limit, 0.0);
}

TEST(CliBenchSettings, SystemsAndWorkload) {
  EXPECT_EQ(bench_refusal({"--baseline", "whisper.cpp"}),
            "unknown --baseline 'whisper.cpp' (use whispercpp-stream or none)");
  EXPECT_EQ(bench_refusal({"--policy", "none"}), "nothing to measure");
  EXPECT_EQ(bench_refusal({"--workload", "tokens"}), "--workload must be model or reference");
  EXPECT_EQ(bench_refusal({"--workload", "reference", "--beams", "2"}),
            "--workload reference decodes greedily: use --beams 1");
}

TEST(CliBenchSettings, TurnStreamsStaggered) {
  EXPECT_DOUBLE_EQ(bench({"--turns", "multi-turn"}).turn_stagger, 1.0);
  EXPECT_DOUBLE_EQ(bench({"--turns", "multi-turn", "--turn-stagger", "0"}).turn_stagger, 0.0);
  EXPECT_DOUBLE_EQ(bench({"--turns", "two-speaker", "--turn-stagger", "0.25"}).turn_stagger, 0.25);
  EXPECT_EQ(bench_refusal({"--turns", "multi-turn", "--turn-stagger", "-1"}), "--turn-stagger must be 0 to 60 seconds");
  EXPECT_EQ(bench_refusal({"--turn-stagger", "1"}), "--turn-stagger goes with --turns");
  EXPECT_EQ(bench_refusal({"--turns", "multi-turn", "--markdown", "t.md"}),
            "--turns writes its report with --json only");
  EXPECT_EQ(bench_refusal({"--turns", "multi-turn", "--plot", "t.svg"}), "--turns writes its report with --json only");
}

TEST(CliBenchSettings, RequiredOptions) {
  EXPECT_EQ(refusal([] {
              read<BenchSettings>({"--model", "m.bin"}, "bench");
            }),
            "bench: --dataset is required (see --help)");
}

TEST(CliBenchSettings, AnAcceptedCommandLineIsTyped) {
  const BenchSettings s = bench({"--model",
                                 "a.bin,b.gguf",
                                 "--policy",
                                 "alignatt,none,localagreement",
                                 "--baseline",
                                 "none,whispercpp-stream",
                                 "--realtime",
                                 "--chunk",
                                 "0.25",
                                 "--sessions",
                                 "3",
                                 "--threads",
                                 "2",
                                 "--language",
                                 "fr",
                                 "--normalizer",
                                 "basic",
                                 "--workload",
                                 "reference",
                                 "--device",
                                 "cpu",
                                 "--baseline-no-fallback",
                                 "--baseline-binary",
                                 "/opt/stream",
                                 "--json",
                                 "out.json",
                                 "--plot",
                                 "d.svg"});
  EXPECT_EQ(s.dataset, "no-such-dataset");
  EXPECT_EQ(s.models, (std::vector<std::string>{"a.bin", "b.gguf"}));
  EXPECT_EQ(s.policies, (std::vector<std::string>{"alignatt", "localagreement"}));
  EXPECT_EQ(s.baselines, (std::vector<std::string>{"whispercpp-stream"}));
  EXPECT_EQ(s.baseline_binary, "/opt/stream");
  EXPECT_TRUE(s.baseline_no_fallback);
  EXPECT_EQ(s.stream.pacing, bench::Pacing::kRealtime);
  EXPECT_DOUBLE_EQ(s.stream.chunk_seconds, 0.25);
  EXPECT_FALSE(s.stream.keep_tails);  // set by the run when a translation is measured
  EXPECT_EQ(s.sessions, 3);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.model.runtime.threads, 2);
  EXPECT_TRUE(s.on_cpu);
  EXPECT_TRUE(s.model.path.empty());
  EXPECT_EQ(s.model.policies.alignatt.beams, 1);
  EXPECT_EQ(s.language, "fr");
  EXPECT_EQ(s.normalizer, bench::NormalizerKind::kBasic);
  EXPECT_EQ(s.workload, BenchWorkload::kReference);
  EXPECT_STREQ(to_string(s.workload), "reference");
  EXPECT_FALSE(s.capacity);
  EXPECT_EQ(s.json, "out.json");
  EXPECT_FALSE(s.markdown);
  EXPECT_EQ(s.plot, "d.svg");
}

TEST(CliBenchSettings, TheDefaults) {
  const BenchSettings s = bench({});
  EXPECT_EQ(s.policies, (std::vector<std::string>{"alignatt"}));
  EXPECT_TRUE(s.baselines.empty());
  EXPECT_EQ(s.stream.pacing, bench::Pacing::kAsFastAsPossible);
  EXPECT_DOUBLE_EQ(s.stream.chunk_seconds, 0.5);
  EXPECT_EQ(s.sessions, 1);
  EXPECT_EQ(s.language, "en");
  EXPECT_EQ(s.normalizer, bench::NormalizerKind::kEnglish);
  EXPECT_EQ(s.workload, BenchWorkload::kModel);
  EXPECT_EQ(s.vad_model, "");
  EXPECT_FALSE(s.json || s.markdown || s.plot);
}

TEST(CliBenchSettings, AnAcceptedCapacityCommandLineIsTyped) {
  BenchSettings s = bench({"--capacity", "--sessions", "1,2,4", "--workers", "3", "--max-sessions", "8",
                           "--max-buffered-seconds", "0", "--profile", "--lag-limit", "1.5", "--markdown", "c.md"});
  ASSERT_TRUE(s.capacity);
  EXPECT_EQ(s.capacity->sessions, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(s.workers.workers, 3);
  EXPECT_EQ(s.capacity->max_sessions, 8);
  EXPECT_DOUBLE_EQ(s.capacity->max_buffered_seconds, 0);
  EXPECT_TRUE(s.capacity->profile);
  EXPECT_DOUBLE_EQ(s.lag_limit(), 1.5);
  EXPECT_EQ(s.sessions, 1);  // a capacity run sets its own
  EXPECT_EQ(s.markdown, "c.md");

  // --sessions auto searches; the lag limit is then the chunk + 0.5 s.
  s = bench({"--capacity", "--sessions", "auto", "--chunk", "0.25"});
  ASSERT_TRUE(s.capacity);
  EXPECT_TRUE(s.capacity->sessions.empty());
  EXPECT_FALSE(s.workers.workers);  // auto: planned from the machine and the model (worker_plan_test.cpp)
  EXPECT_FALSE(s.workers.threads);
  EXPECT_TRUE(s.workers.lend_cores);
  EXPECT_TRUE(s.workers.stop_passes);
  EXPECT_EQ(s.capacity->max_sessions, 64);
  EXPECT_DOUBLE_EQ(s.capacity->max_buffered_seconds, 60);
  EXPECT_DOUBLE_EQ(s.lag_limit(), 0.75);
}

ServeSettings serve(std::vector<std::string> extra) {
  std::vector<std::string> argv = {"--model", "no-such-model.bin", "--pcm-input"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return read<ServeSettings>(argv, "serve");
}

std::string serve_refusal(std::vector<std::string> extra) {
  return refusal([&] { serve(extra); });
}

TEST(CliServeSettings, RangesAreRefusedNamingTheFlag) {
  EXPECT_EQ(serve_refusal({"--port", "65536"}), "--port must be 0..65535");
  EXPECT_EQ(serve_refusal({"--max-connections", "0"}), "--max-connections must be 1..1000000");
  EXPECT_EQ(serve_refusal({"--max-audio-minutes", "0"}), "--max-audio-minutes must be > 0");
  EXPECT_EQ(serve_refusal({"--idle-timeout", "0"}), "--idle-timeout must be > 0");
  EXPECT_EQ(serve_refusal({"--write-timeout", "0"}), "--write-timeout must be > 0");
  EXPECT_EQ(serve_refusal({"--shutdown-grace-s", "-1"}), "--shutdown-grace-s must be >= 0");
  EXPECT_EQ(serve_refusal({"--max-uploads", "0"}), "--max-uploads must be >= 1");
  EXPECT_EQ(serve_refusal({"--drain-seconds", "-1"}), "--drain-seconds must be >= 0");
  EXPECT_EQ(serve_refusal({"--max-sessions", "0"}), "--max-sessions must be >= 1");
  EXPECT_EQ(serve_refusal({"--workers", "0"}), "--workers must be auto or 1..4096");
  EXPECT_EQ(serve_refusal({"--workers", "many"}), "--workers must be auto or 1..4096");
  EXPECT_EQ(serve_refusal({"--lend-cores", "maybe"}), "--lend-cores must be on or off, not 'maybe'");
  EXPECT_EQ(serve_refusal({"--stop-passes", "no"}), "--stop-passes must be on or off, not 'no'");
  EXPECT_EQ(serve_refusal({"--max-step-seconds", "0"}), "--max-step-seconds must be > 0");
  EXPECT_EQ(serve_refusal({"--max-buffered-seconds", "5"}),
            "--max-buffered-seconds must be at least --max-step-seconds");
  EXPECT_EQ(serve_refusal({"--threads", "0"}), "--threads must be >= 1");
}

TEST(CliServeSettings, TheEncoderOverTheAudioPresentOnRequest) {
  using engine::WhisperOptions;
  EXPECT_EQ(serve({}).model.options<WhisperOptions>().encoder_input, whisper::EncoderInput::kFullWindow);
  EXPECT_EQ(serve({"--encoder-input", "audio"}).model.options<WhisperOptions>().encoder_input,
            whisper::EncoderInput::kAudioOnly);
  EXPECT_EQ(serve_refusal({"--encoder-input", "half"}), "--encoder-input must be full or audio");
}

TEST(CliServeSettings, AnAcceptedCommandLineIsTyped) {
  const ServeSettings s = serve({"--port",
                                 "0",
                                 "--no-pull",
                                 "--no-vac",
                                 "--workers",
                                 "2",
                                 "--policy",
                                 "localagreement",
                                 "--language",
                                 "de",
                                 "--pause-segmentation-seconds",
                                 "3",
                                 "--beams",
                                 "2",
                                 "--trace-dir",
                                 "traces",
                                 "--warmup-file",
                                 "w.wav",
                                 "--max-buffered-seconds",
                                 "0",
                                 "--device",
                                 "cpu",
                                 "--stop-passes",
                                 "off"});
  EXPECT_EQ(s.model_name, "no-such-model.bin");
  EXPECT_TRUE(s.model.path.empty());
  EXPECT_FALSE(s.pull);
  EXPECT_FALSE(s.vac);
  EXPECT_EQ(s.policy, "localagreement");
  EXPECT_EQ(s.trace_dir, "traces");
  EXPECT_EQ(s.warmup_file, "w.wav");
  EXPECT_EQ(s.config.port, 0);
  EXPECT_TRUE(s.config.pcm_input);
  EXPECT_EQ(s.workers.workers, 2);
  EXPECT_EQ(s.config.default_language, "de");
  EXPECT_DOUBLE_EQ(s.config.stream.pause_segmentation_seconds, 3);
  EXPECT_DOUBLE_EQ(s.config.stream.max_pending_seconds, 0);
  EXPECT_DOUBLE_EQ(s.config.file.max_pending_seconds, 0);
  EXPECT_FALSE(s.config.stream.stop_passes);
  EXPECT_FALSE(s.config.file.stop_passes);
  EXPECT_TRUE(s.config.stages.empty());  // known once the stages load
  EXPECT_EQ(s.model.policies.alignatt.beams, 2);
  EXPECT_EQ(s.model.policies.alignatt.language, "de");
  EXPECT_DOUBLE_EQ(s.model.policies.alignatt.long_silence, 3);
  EXPECT_DOUBLE_EQ(s.model.policies.localagreement.long_silence, 3);
}

TranscribeSettings transcribe(std::vector<std::string> argv) { return read<TranscribeSettings>(argv, "transcribe"); }

TEST(CliTranscribeSettings, RefusalsNameTheFlag) {
  EXPECT_EQ(refusal([] { transcribe({"--model", "m.bin"}); }), "no input file (see --help)");
  EXPECT_EQ(refusal([] {
              transcribe({"--model", "m.bin", "--format", "docx", "a.wav"});
            }),
            "unknown --format 'docx' (use txt, json, srt, vtt or rttm)");
  EXPECT_EQ(refusal([] {
              transcribe({"--model", "m.bin", "--guards", "maybe", "a.wav"});
            }),
            "--guards must be on or off, got 'maybe'");
}

TEST(CliTranscribeSettings, AnAcceptedCommandLineIsTyped) {
  const TranscribeSettings s = transcribe({"a.wav", "--model", "m.bin", "--chunk", "1", "--realtime", "--format", "srt",
                                           "--never-fire", "--trace", "t.jsonl", "--language", "en", "b.wav"});
  EXPECT_EQ(s.files, (std::vector<std::string>{"a.wav", "b.wav"}));
  EXPECT_EQ(s.model_name, "m.bin");
  EXPECT_DOUBLE_EQ(s.feed.chunk_seconds, 1);
  EXPECT_TRUE(s.feed.realtime);
  EXPECT_EQ(s.format, "srt");
  EXPECT_EQ(s.language, "en");
  EXPECT_EQ(s.policy, "");
  EXPECT_TRUE(s.model.policies.alignatt.never_fire);
  EXPECT_FALSE(s.model.policies.alignatt.on_trace);  // bound to the file when the run opens it
  EXPECT_EQ(s.trace, "t.jsonl");
  EXPECT_FALSE(s.events);
  EXPECT_FALSE(s.output);
}

WorkerRequest request(std::optional<int> workers, std::optional<int> threads, bool lend = true) {
  WorkerRequest r;
  r.workers = workers;
  r.threads = threads;
  r.lend_cores = lend;
  return r;
}

// A plan as {workers, threads per pass, the most a lone pass may take}.
std::tuple<int, int, int> shape(const WorkerPlan& p) { return {p.workers, p.threads.threads, p.threads.max_threads}; }

// --workers auto and --threads auto on the CPU: a worker per core, one thread per
// pass, and a lone pass may borrow every idle core; either count given sets the other.
TEST(CliWorkerPlan, AutoRunsAWorkerPerCoreAndALonePassBorrowsTheIdleCores) {
  const engine::Capabilities whisper;
  const engine::RuntimeOptions cpu;
  WorkerPlan p = plan_workers(request({}, {}), whisper, cpu, 4);
  EXPECT_EQ(shape(p), std::make_tuple(4, 1, 4));
  EXPECT_EQ(p.describe(), "4 workers x 1 thread per pass, a lone pass up to 4");
  EXPECT_EQ(shape(plan_workers(request({}, 2), whisper, cpu, 4)), std::make_tuple(2, 2, 4));  // --threads 2
  EXPECT_EQ(shape(plan_workers(request(2, {}), whisper, cpu, 4)), std::make_tuple(2, 2, 4));  // --workers 2
  p = plan_workers(request(1, 2), whisper, cpu, 4);  // one worker: nothing to borrow
  EXPECT_EQ(shape(p), std::make_tuple(1, 2, 2));
  EXPECT_EQ(p.describe(), "1 worker x 2 threads per pass");
  // More workers than cores: a lone pass never past the machine.
  EXPECT_EQ(shape(plan_workers(request(4, 1), whisper, cpu, 2)), std::make_tuple(4, 1, 2));
  EXPECT_EQ(shape(plan_workers(request({}, {}, false), whisper, cpu, 4)), std::make_tuple(4, 1, 1));  // lend off
  // More threads than cores: one worker, on the threads asked for.
  EXPECT_EQ(shape(plan_workers(request({}, 3), whisper, cpu, 2)), std::make_tuple(1, 3, 3));
}

// A family whose passes run one at a time, a GPU, or batching: nothing decided
// per pass (each backend keeps --threads), one worker unless asked (N to batch N).
TEST(CliWorkerPlan, SerialFamiliesGpusAndBatchingKeepTheirThreads) {
  engine::Capabilities qwen;
  qwen.serial_passes = true;
  const engine::RuntimeOptions cpu;
  const WorkerPlan p = plan_workers(request({}, {}), qwen, cpu, 8);
  EXPECT_EQ(shape(p), std::make_tuple(1, 0, 0));
  EXPECT_EQ(p.describe(), "1 worker, each pass on the model's threads");
  EXPECT_EQ(shape(plan_workers(request(3, {}), qwen, cpu, 8)), std::make_tuple(3, 0, 0));
  engine::RuntimeOptions gpu;
  gpu.device = "CUDA0";
  EXPECT_EQ(shape(plan_workers(request({}, {}), engine::Capabilities{}, gpu, 8)), std::make_tuple(1, 0, 0));
  engine::RuntimeOptions batched;
  batched.batch_streams = 16;
  // 16 workers, so that 16 steps can wait to be batched.
  EXPECT_EQ(shape(plan_workers(request({}, {}), engine::Capabilities{}, batched, 2)), std::make_tuple(16, 0, 0));
}

}  // namespace
}  // namespace earshot::cli

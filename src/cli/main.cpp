// `earshot <command> [options]`: the single binary. Commands are listed here;
// each is implemented in its own file.
#include <ggml-backend.h>
#include <ggml.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string>

#include "audio/audio.h"
#include "cli/commands.h"
#include "cli/worker_plan.h"
#include "common/error.h"
#include "model/runtime/openblas_ops.h"

namespace {

using earshot::cli::Command;

// The version, whether FFmpeg decodes compressed audio, the CPU kernels of the
// encoders' products (--cpu-kernels auto), serve's default worker plan on this
// machine (cli/worker_plan.h), and the compute devices the linked ggml
// offers: a CUDA build (EARSHOT_CUDA=ON) lists its GPUs here, so a user can see
// what was built.
int run_version(const earshot::cli::CommandArgs&) {
  std::printf("earshot %s (ggml %s)\n", EARSHOT_VERSION, ggml_version());
  std::printf("audio: %s\n", earshot::audio::ffmpeg_available()
                                 ? "WAV, and every format FFmpeg decodes (files and streams)"
                                 : "WAV files and raw PCM streams (built without FFmpeg)");
  std::printf("cpu kernels: %s; %s\n",
              earshot::runtime::openblas_available()
                  ? (earshot::runtime::openblas_status() + " for the encoders' products").c_str()
                  : (earshot::runtime::openblas_status() + "; ggml's kernels throughout").c_str(),
              earshot::runtime::amx_status().c_str());
  {
    const int cores = earshot::cli::machine_cores();
    const earshot::cli::WorkerPlan plan =
        earshot::cli::plan_workers({}, earshot::engine::Capabilities{}, earshot::engine::RuntimeOptions{}, cores);
    std::printf(
        "workers: serve's and bench's default plan on %d cores: %s (Qwen3-ASR, a GPU or --batch-decode: "
        "one worker, each pass on --threads)\n",
        cores, plan.describe().c_str());
  }
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t device = ggml_backend_dev_get(i);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(device, &free, &total);
    std::printf("device %s: %s, %.1f GiB\n", ggml_backend_dev_name(device), ggml_backend_dev_description(device),
                static_cast<double>(total) / (1024.0 * 1024.0 * 1024.0));
  }
  return 0;
}

constexpr Command kCommands[] = {
    {"version", "print the version and the compute devices", run_version, "docs/usage.md"},
    {"transcribe", "transcribe audio files as a live stream would", earshot::cli::run_transcribe,
     "docs/usage.md#earshot-transcribe, docs/models.md"},
    {"serve", "run the live transcription server (web page; WhisperLiveKit, Deepgram and OpenAI APIs)",
     earshot::cli::run_serve, "docs/usage.md#earshot-serve, docs/protocols.md, docs/security.md, docs/deployment.md"},
    {"pull", "download a published model (any family's, diarization, translation LLM) into the cache",
     earshot::cli::run_pull, "docs/usage.md#earshot-pull, docs/models.md"},
    {"models", "list the known models, their sizes and which are cached", earshot::cli::run_models,
     "docs/usage.md#earshot-models, docs/models.md"},
    {"quantize", "quantise a Whisper or Parakeet model file (q8_0, q5_0, q4_0, k-quants ...)",
     earshot::cli::run_quantize, "docs/usage.md#earshot-quantize, docs/models.md"},
    {"bench", "measure WER, word delays and speed of policies and baselines", earshot::cli::run_bench,
     "docs/usage.md#earshot-bench, docs/benchmarks.md, docs/diarization.md"},
    {"replay-translation", "replay a recorded translation input stream (A/B of --commit-mode)",
     earshot::cli::run_replay_translation, "docs/usage.md#earshot-replay-translation, docs/translation.md"},
    {"calibrate-translation", "rank a translation model's alignment heads on sentence pairs (writes a calibration)",
     earshot::cli::run_calibrate_translation, "docs/usage.md#earshot-calibrate-translation, docs/translation.md"},
};

bool asks_for_help(const earshot::cli::CommandArgs& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

void print_usage() {
  std::printf(
      "earshot: real-time speech-to-text and translation server\n\nusage: earshot <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::printf("  %-21s %s\n", c.name, c.summary);
  std::printf("\n`earshot <command> --help` describes each command's options.\n");
  std::printf("\ndocumentation (docs/ in the source tree; docs/usage.md has every command and option):\n");
  for (const Command& c : kCommands) std::printf("  %-21s %s\n", c.name, c.docs);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      const earshot::cli::CommandArgs args(argv + 2, argv + argc);
      const int status = c.run(args);
      if (status == 0 && asks_for_help(args) && std::strcmp(c.name, "version") != 0)
        std::printf("\ndocumentation: %s\n", c.docs);
      return status;
    } catch (const earshot::Error& e) {
      std::fprintf(stderr, "earshot %s: %s\n", c.name, e.what());
      return e.code() == earshot::ErrorCode::kInvalidArgument ? 2 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "earshot %s: unexpected error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "earshot: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}

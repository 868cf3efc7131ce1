// earshot-whispercpp-stream: runs the whispercpp-stream baseline over audio
// prepared by `earshot bench` and writes the run traces for it to score.
//
// Why a separate binary: libwhisper is a test oracle and a baseline only; the
// `earshot` binary never links it (one ggml, no foreign model code in the
// product). Running the baseline in its own process also makes its CPU time
// and peak RSS exact (wait4() of the child), instead of mixed with earshot's.
// The streaming runner, chunking and clocks are the same code (earshot_bench).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/runner.h"
#include "bench/trace_io.h"
#include "bench/whispercpp_stream.h"
#include "common/command_line.h"
#include "common/error.h"

int main(int argc, char** argv) {
  using namespace earshot;
  Args args("earshot-whispercpp-stream",
            "earshot-whispercpp-stream --model M --audio SAMPLES --out TRACE [options] (started by earshot bench)");
  args.option("model", "ggml Whisper model file for libwhisper")
      .option("audio", "float32 samples written by earshot bench")
      .option("out", "where to write the run trace")
      .option("chunk", "seconds of audio per insert", "0.5")
      .option("pacing", "realtime or as-fast-as-possible", "as-fast-as-possible")
      .option("sessions", "concurrent sessions", "1")
      .option("threads", "libwhisper threads per session", "4")
      .option("language", "language code or auto", "en")
      .option("step-ms", "stream.cpp --step", "3000")
      .option("length-ms", "stream.cpp --length", "10000")
      .option("keep-ms", "stream.cpp --keep", "200")
      .flag("no-fallback", "stream.cpp -nf: no temperature fallback")
      .flag("cpu", "libwhisper on the CPU only (earshot bench --device cpu); else its first GPU when it has one");
  try {
    if (!args.parse_or_help(std::vector<std::string>(argv + 1, argv + argc), {.required = {"model", "audio", "out"}}))
      return 0;
    bench::WhisperCppStreamOptions o;
    o.model_path = args.get("model");
    o.language = args.get("language");
    o.threads = static_cast<int>(args.get_int("threads"));
    o.step_ms = static_cast<int>(args.get_int("step-ms"));
    o.length_ms = static_cast<int>(args.get_int("length-ms"));
    o.keep_ms = static_cast<int>(args.get_int("keep-ms"));
    o.no_fallback = args.get_flag("no-fallback");
    o.use_gpu = !args.get_flag("cpu");
    if (o.step_ms <= 0) throw Error(ErrorCode::kInvalidArgument, "--step-ms must be positive");
    bench::StreamOptions so;
    so.chunk_seconds = args.get_double("chunk");
    const std::string pacing = args.get("pacing");
    if (pacing != "realtime" && pacing != "as-fast-as-possible")
      throw Error(ErrorCode::kInvalidArgument, "--pacing must be realtime or as-fast-as-possible");
    so.pacing = pacing == "realtime" ? bench::Pacing::kRealtime : bench::Pacing::kAsFastAsPossible;
    const auto audio = bench::read_audio_file(args.get("audio"));
    const bench::SystemRun run = bench::run_system(
        [&] { return bench::make_whispercpp_stream(o); }, audio, so, static_cast<int>(args.get_int("sessions")),
        [](int session, int done, int total) {
          std::fprintf(stderr, "whispercpp-stream: session %d %d/%d\n", session, done, total);
        });
    std::ofstream out(args.get("out"));
    bench::write_run(out, run);
    if (!out) throw Error(ErrorCode::kIo, "cannot write " + args.get("out"));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "earshot-whispercpp-stream: %s\n", e.what());
    return 1;
  }
}

// A line-based text format for SystemRun, so a system measured in a child
// process (the whispercpp-stream baseline) hands its traces to `earshot bench`
// for the same accounting. Doubles are printed with 17 significant digits;
// word text is the rest of its line with %, CR and LF percent-encoded.
// Also: the audio handed to the child (raw float32 samples per utterance).
#pragma once

#include <filesystem>
#include <istream>
#include <ostream>
#include <vector>

#include "bench/runner.h"

namespace earshot::bench {

void write_run(std::ostream& out, const SystemRun& run);
// Throws earshot::Error(kInvalidArgument) naming the line on malformed input.
SystemRun read_run(std::istream& in);

// [u64 count][for each: u64 n, n float32] in host byte order.
void write_audio_file(const std::filesystem::path& path, const std::vector<std::vector<float>>& audio);
std::vector<std::vector<float>> read_audio_file(const std::filesystem::path& path);

}  // namespace earshot::bench

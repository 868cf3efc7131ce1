// NIST RTTM speaker records ("who spoke when"), the one writer: transcribe's
// `--format rttm` (protocol/transcript.h) and the DER scorer's files
// (bench/der.h, which also parses them) both write through format_rttm.
#pragma once

#include <string>
#include <vector>

namespace earshot::protocol {

// One RTTM SPEAKER record: `SPEAKER <file> <channel> <start> <duration> <NA>
// <NA> <speaker> <NA> <NA>`. Times in seconds.
struct RttmSegment {
  std::string file;
  std::string channel = "1";
  double start = 0.0;
  double duration = 0.0;
  std::string speaker;

  double end() const { return start + duration; }
  bool operator==(const RttmSegment&) const = default;
};

// Decimals of the times: microseconds (the scorer's files, which round-trip
// sample-exact turns of generated conversations) or milliseconds (transcripts,
// whose word times are on a model's frame grid of 10 ms or more).
inline constexpr int kRttmMicroseconds = 6;
inline constexpr int kRttmMilliseconds = 3;

// RTTM text, one SPEAKER line per segment, times with `decimals` decimals (0..9).
// The start and the end are rounded and the duration is their difference, so
// touching segments stay touching and disjoint ones disjoint (md-eval refuses a
// speaker's overlapping segments). Throws Error(kInvalidArgument) for a file,
// channel or speaker that is not one non-empty word, or a start or duration that
// is not a finite number >= 0.
std::string format_rttm(const std::vector<RttmSegment>& segments, int decimals = kRttmMicroseconds);

}  // namespace earshot::protocol

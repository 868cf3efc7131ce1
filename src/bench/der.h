// Diarization error rate ("who spoke when"), scored as NIST's md-eval.pl
// (sctk) scores SPEAKER records: segments in, seconds and percentages out.
//
// Per (file, channel) of the reference:
//   - evaluated region: the UEM given for the file, else the reference's own
//     extent (first reference start to last reference end), as md-eval;
//   - speaker mapping: one-to-one, hypothesis to reference speakers, the one
//     maximising the total time they speak together over the evaluated region
//     (before collars are cut out, as md-eval), found by the Hungarian method
//     (any number of speakers); pairs that never overlap stay unmapped;
//   - scored region: the evaluated region less a no-score collar of +-collar
//     seconds around every reference segment start and end (md-eval's -c;
//     pyannote's collar is the total width, so pyannote 0.5 = md-eval 0.25),
//     and less the reference's overlapped speech when score_overlap is false
//     (md-eval's -1);
//   - every stretch of the scored region with N_ref reference and N_hyp
//     hypothesis speakers, N_map of them mapped to each other, adds
//     dur * N_ref to scored speaker time, dur * max(0, N_ref - N_hyp) to
//     missed, dur * max(0, N_hyp - N_ref) to false alarm and
//     dur * (min(N_ref, N_hyp) - N_map) to speaker error (overlap is scored:
//     every reference speaker counts).
// Files and channels are scored separately and summed; hypothesis files the
// reference lacks are not scored (listed in DerScore::unscored_hypothesis_files).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/rttm.h"

namespace earshot::bench {

// One RTTM SPEAKER record (protocol/rttm.h): `SPEAKER <file> <channel> <start>
// <duration> <NA> <NA> <speaker> <NA> <NA>`. Times in seconds.
using SpeakerSegment = protocol::RttmSegment;

// Parses RTTM text. Blank lines and lines starting with '#' or ';' are
// skipped, SPKR-INFO records are ignored; every other record must be a
// SPEAKER record of at least 9 fields with a finite start >= 0 and duration
// >= 0, and one speaker's segments within a file and channel must not
// overlap (md-eval refuses the same). Throws Error(kInvalidArgument) naming
// `source` and the line. Segments keep the text's order.
std::vector<SpeakerSegment> parse_rttm(std::string_view text, const std::string& source);
// Reads and parses a file (kIo when it cannot be read).
std::vector<SpeakerSegment> read_rttm(const std::filesystem::path& path);

// Writes an RTTM file through the one writer, protocol::format_rttm, with
// times to the microsecond (kIo when it cannot be written).
void write_rttm(const std::filesystem::path& path, const std::vector<SpeakerSegment>& segments);

struct TimeRange {
  double start = 0.0, end = 0.0;
};

// Parses a UEM (the evaluated regions): `<file> <channel> <start> <end>` per
// line, '#' and ';' lines and blank lines skipped. Ranges are kept per file
// (the channel field is read but not kept: one channel per file). Throws
// Error(kInvalidArgument) naming `source` and the line for a short record, a
// time that is not a number >= 0, end <= start, or ranges of one file that
// overlap (md-eval refuses the last two too). Unlike md-eval, file ids are
// taken as written (md-eval strips a directory and an extension).
std::map<std::string, std::vector<TimeRange>> parse_uem(std::string_view text, const std::string& source);
std::map<std::string, std::vector<TimeRange>> read_uem(const std::filesystem::path& path);

struct DerOptions {
  double collar = 0.0;        // seconds each side of every reference boundary; >= 0
  bool score_overlap = true;  // false: only stretches with at most one reference speaker
  // Evaluated region per file (all channels); a file not listed is evaluated
  // over its reference's extent.
  std::map<std::string, std::vector<TimeRange>> uem;
};

struct DerScore {
  // Seconds.
  double evaluated_time = 0.0;  // the evaluated region (md-eval's EVAL TIME)
  double scored_time = 0.0;     // the scored region (SCORED TIME)
  double scored_speech = 0.0;   // scored time with reference speech (SCORED SPEECH)
  double missed_speech = 0.0;   // reference speech, no hypothesis speech (MISSED SPEECH)
  double falarm_speech = 0.0;   // hypothesis speech, no reference speech (FALARM SPEECH)
  double scored_speaker = 0.0;  // reference speaker time (SCORED SPEAKER TIME), the denominator
  double missed_speaker = 0.0;  // MISSED SPEAKER TIME
  double falarm_speaker = 0.0;  // FALARM SPEAKER TIME
  double speaker_error = 0.0;   // SPEAKER ERROR TIME (confusion)
  // Percentages of scored speaker time; NaN when there is none (md-eval
  // divides by zero there).
  double missed_percent() const { return percent(missed_speaker); }
  double falarm_percent() const { return percent(falarm_speaker); }
  double speaker_error_percent() const { return percent(speaker_error); }
  double der_percent() const { return percent(missed_speaker + falarm_speaker + speaker_error); }
  double percent(double seconds) const;

  // The mapping chosen per "file channel": (reference, hypothesis) pairs,
  // sorted by reference speaker.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> mapping;
  std::vector<std::string> unscored_hypothesis_files;  // hypothesis files the reference lacks
};

// Throws Error(kInvalidArgument) for a negative or non-finite collar, a
// segment with a negative or non-finite time, or a UEM range with end <
// start. One speaker's overlapping hypothesis segments count once.
DerScore score_der(const std::vector<SpeakerSegment>& reference, const std::vector<SpeakerSegment>& hypothesis,
                   const DerOptions& options = {});

// The one-to-one assignment of rows to columns that maximises the summed
// weight (Hungarian method, O(n^2 m)); result[row] = column or -1. Exposed for
// tests.
std::vector<int> max_weight_assignment(const std::vector<std::vector<double>>& weight);

}  // namespace earshot::bench

// Speaker-attributed WER: cpWER, the concatenated minimum-permutation word
// error rate of the CHiME-6 challenge (as MeetEval's `cpwer`).
//
//   - per reference speaker, that speaker's words concatenated in time order;
//     per hypothesis speaker likewise (words the diarization gave no speaker
//     form one hypothesis "speaker" of their own);
//   - a one-to-one assignment of hypothesis to reference speakers; a speaker
//     of either side left without a partner is paired with empty text: an
//     extra hypothesis speaker's words are all insertions, an extra reference
//     speaker's all deletions;
//   - the assignment is the one minimising the total word errors (S + D + I),
//     found with the Hungarian method (der.h's max_weight_assignment, exact
//     for any number of speakers);
//   - cpWER = total errors / total reference words.
// A pair's errors are align_tokens' (wer.h: sclite's costs, the plain WER's
// alignment), so a perfect attribution scores the plain WER of the
// concatenation, and relabelling the hypothesis speakers changes nothing.
//
// Hypothesis speakers are named as the RTTM turns name them (S1, S2...),
// "(none)" for the words without a speaker.
//
// STM truth: NIST's segment time marks, one segment a line,
//   <file> <channel> <speaker> <begin> <end> [<label>] <transcript...>
// with ';;' comment lines and blank lines skipped, an optional <label> field
// in angle brackets ("<o,f0,male>") skipped, and segments whose speaker (or
// whole transcript) is `ignore_time_segment_in_scoring` (any case) left out.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/normalizer.h"
#include "bench/wer.h"
#include "policy/online_processor.h"

namespace earshot::bench {

// One run of one speaker's words (already normalised, split into words).
struct SpeakerWords {
  std::string speaker;
  std::vector<std::string> words;
};

struct CpwerScore {
  // Summed over the assigned pairs: reference = all reference words,
  // substitutions, deletions, insertions (unpaired speakers' words included).
  ErrorCounts words;
  int reference_speakers = 0;
  int hypothesis_speakers = 0;
  // The assignment: (reference speaker, hypothesis speaker) pairs sorted by
  // reference speaker; "" on the side of a speaker left unpaired (those
  // after the pairs, sorted by hypothesis speaker).
  std::vector<std::pair<std::string, std::string>> mapping;

  double rate() const { return words.rate(); }  // errors / reference words
  CpwerScore& operator+=(const CpwerScore& o);  // sums the counts and speakers (not the mapping)
};

// The runs of one speaker are concatenated in the order given (callers give
// them in time order).
CpwerScore score_cpwer(const std::vector<SpeakerWords>& reference, const std::vector<SpeakerWords>& hypothesis);

// One STM segment.
struct StmSegment {
  std::string file, channel, speaker;
  double begin = 0, end = 0;
  std::string transcript;
};

// Parses STM text (see above). Throws Error(kInvalidArgument) naming `source`
// and the line for a record of fewer than 5 fields, a time that is not a
// number >= 0, or an end before its begin.
std::vector<StmSegment> parse_stm(std::string_view text, const std::string& source);
// Reads and parses a file (kIo when it cannot be read).
std::vector<StmSegment> read_stm(const std::filesystem::path& path);

// A diarized stream's words (each with its speaker, 1-based; <= 0 for none) against an
// STM truth: the segments in order of begin time (stable), each speaker's
// transcripts joined with spaces, the hypothesis speaker's words joined as
// the plain WER joins a stream's words; each speaker's text normalised with
// `kind` before it is split into words.
CpwerScore score_cpwer_words(const std::vector<StmSegment>& reference, const std::vector<Word>& hypothesis,
                             NormalizerKind kind);

}  // namespace earshot::bench

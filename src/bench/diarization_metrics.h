// `earshot bench --diarization-model`: the diarization stage's speaker turns
// scored against a clip's RTTM truth, and the stage's compute.
//
// Truth convention: the file AUDIO.rttm next to each audio file (talk.wav ->
// talk.rttm), in either dataset layout (dataset.h); one file id and channel in
// it (the clip's). A clip without one is diarized for its compute only and the
// report says "no RTTM truth".
//
// Turns: the segments of the stream's committed words with their speakers
// (protocol::segments, the rule `earshot transcribe --format rttm` writes),
// times rounded to the millisecond as in that file: the turns scored are the
// RTTM transcribe writes for the same words. They take the truth's file id and
// channel (else the clip's id and channel 1).
//
// DER (der.h, as md-eval.pl): missed, false alarm and confusion (speaker
// error) over the scored speaker time, overlap scored, at collar 0.25 s (NIST
// RT) and 0 (DIHARD). The total sums every clip's seconds (as md-eval sums its
// files), so longer clips weigh more.
//
// cpWER (cpwer.h): with the file AUDIO.stm next to the audio (a speaker-
// labelled reference, NIST STM), the stream's committed words with the
// speakers the stage gave them against it, after the bench's --normalizer;
// per clip and in total (every clip's errors over every clip's reference
// words). A clip without one has no cpWER; the report says so.
//
// Compute: wall time inside the stage's calls (its model steps over the audio,
// the speaker assignment, the last step at the end) per audio second, and the
// process CPU time of the diarization runs per audio second (the model's
// threads included); apart from the ASR's, which does not include them.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/cpwer.h"
#include "bench/der.h"
#include "policy/online_processor.h"

namespace earshot::bench {

struct Utterance;  // metrics.h, which includes this header (SystemResult::diarization)

inline constexpr double kDiarizationCollar = 0.25;  // seconds each side of a truth boundary (md-eval's -c)

struct SpeakerTruth {
  std::string path;
  std::vector<SpeakerSegment> segments;
};

// AUDIO.rttm next to an utterance's audio file.
std::filesystem::path speaker_truth_path(const Utterance& utterance);
// One entry per utterance: its truth, or none when there is no such file.
// Throws Error(kInvalidArgument) naming the file for an RTTM that does not
// parse or describes more than one file id or channel, kIo when it cannot be read.
std::vector<std::optional<SpeakerTruth>> load_speaker_truths(const std::vector<Utterance>& utterances);

// A clip's speaker-labelled reference (AUDIO.stm next to its audio).
struct WordTruth {
  std::string path;
  std::vector<StmSegment> segments;
};

// AUDIO.stm next to an utterance's audio file.
std::filesystem::path word_truth_path(const Utterance& utterance);
// One entry per utterance: its STM, or none when there is no such file.
// Throws Error(kInvalidArgument) naming the file (and line) for an STM that
// does not parse or describes more than one file id or channel, kIo when it
// cannot be read.
std::vector<std::optional<WordTruth>> load_word_truths(const std::vector<Utterance>& utterances);

// One diarized stream.
struct DiarizedClip {
  std::string id;
  int file = 0;
  int session = 0;
  double audio_seconds = 0;
  double compute_seconds = 0;  // wall inside the stage's calls
  long words = 0;              // committed words
  long unknown_words = 0;      // of those, given no speaker
  int speakers = 0;            // distinct speakers in the turns
  std::vector<SpeakerSegment> turns;
  std::string truth;                      // the truth's path; "" = no RTTM truth
  std::optional<DerScore> der;            // collar kDiarizationCollar, overlap scored
  std::optional<DerScore> der_no_collar;  // collar 0, overlap scored
  std::string word_truth;                 // the STM's path; "" = none
  std::optional<CpwerScore> cpwer;        // with an STM
};

struct DiarizationSummary {
  std::string detail;  // the model and its settings
  std::vector<DiarizedClip> clips;
  double audio_seconds = 0;
  double compute_seconds = 0;
  std::optional<double> cpu_seconds;
  long scored_clips = 0;  // with a truth
  // Summed over the clips with a truth; none without any.
  std::optional<DerScore> der, der_no_collar;
  long cpwer_clips = 0;  // with an STM
  // Summed over the clips with an STM (the mapping left empty); none without any.
  std::optional<CpwerScore> cpwer;

  double rtf_wall() const { return audio_seconds > 0 ? compute_seconds / audio_seconds : 0; }
  std::optional<double> rtf_cpu() const {
    if (!cpu_seconds || !(audio_seconds > 0)) return std::nullopt;
    return *cpu_seconds / audio_seconds;
  }
};

// The totals of `clips`.
DiarizationSummary summarize_diarization(std::string detail, std::vector<DiarizedClip> clips,
                                         std::optional<double> cpu_seconds);

// The report's diarization parts (report.h calls them per system that has one).
void write_diarization_table(std::ostream& out, const std::string& system, const DiarizationSummary& d);
// A JSON object.
std::string diarization_json(const DiarizationSummary& d);
void write_diarization_markdown(std::ostream& out, const std::string& system, const DiarizationSummary& d);

}  // namespace earshot::bench

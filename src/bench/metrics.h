// From raw stream traces to the numbers the bench reports.
//
// Delay of a committed word (seconds):
//  * realtime pacing: commit_wall - word_end: from the moment the end of the
//    word was spoken (audio time T reaches the stream at wall time T) to the
//    wall-clock moment it was committed, so chunking and computation count;
//  * as fast as possible: commit_audio - word_end, on the audio clock: how
//    much audio past the word the system needed before committing it
//    (computation is excluded by construction; see the RTF for it).
// word_end is the system's own timestamp of the word, clamped to
// [0, audio fed at commit] (a system cannot know about audio it has not seen;
// clamped words are counted in future_timestamps).
// Provisional delay: the same with the first provisional sighting (see
// runner.h) instead of the commit; it can be negative when a system guesses a
// word before its end was spoken.
// First-word latency: the delay of the first committed word of each stream;
// time_to_first_commit: stream clock at that commit.
// Lag (realtime only): wall - audio after each emission, i.e. how far behind
// real time the session's output is (computation + backlog).
// RTF: cpu_seconds (process CPU time, all threads) and compute_wall_seconds
// (time inside the processor calls) per audio second.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/diarization_metrics.h"
#include "bench/keyterm_recall.h"
#include "bench/normalizer.h"
#include "bench/runner.h"
#include "bench/wer.h"

namespace earshot::bench {

struct Distribution {
  long count = 0;
  double min = 0, mean = 0, median = 0, p90 = 0, max = 0;
  std::vector<double> values;  // sorted, for plots
};
// Percentiles by linear interpolation between closest ranks (numpy's default).
Distribution make_distribution(std::vector<double> values);

struct Utterance {
  std::string id;  // file name without extension
  std::string audio_path;
  std::string reference;  // transcript text
  double audio_seconds = 0;
};

struct FileResult {
  int file = 0;
  int session = 0;
  std::string id;
  double audio_seconds = 0;
  std::string hypothesis;
  TextScore score;
  Distribution delay;
  Distribution provisional_delay;
  std::optional<double> first_word_delay;
  std::optional<double> first_word_provisional_delay;
  std::optional<double> time_to_first_commit;
  long future_timestamps = 0;
  double elapsed_wall = 0;
  double compute_wall = 0;
  std::optional<double> max_lag;  // realtime only
  std::string error;
  std::vector<Emission> emissions;
};

struct SessionResult {
  int session = 0;
  double audio_seconds = 0;
  std::optional<double> mean_lag, max_lag, final_lag;  // realtime only
};

// bench --translate-to (translation.h defines each delay).
struct TranslationSummary {
  std::string target_language;
  Distribution first_draft_delay, commit_delay, final_lag;
  long committed_words = 0;
  long segments = 0;
  std::optional<double> chrf;  // corpus chrF over the streams whose utterance has a reference translation
  long chrf_streams = 0;
  double compute_seconds = 0;  // inside the translation stage, all streams
  double audio_seconds = 0;    // of the translated streams
  long draft_calls = 0;        // translation model calls: drafts (simultaneous mode)
  long final_calls = 0;        // and full translations of closed segments
  // Model calls per minute of audio (none without audio).
  std::optional<double> calls_per_minute(long calls) const {
    if (!(audio_seconds > 0)) return std::nullopt;
    return static_cast<double>(calls) * 60.0 / audio_seconds;
  }
};

struct SystemResult {
  std::string name;    // e.g. "alignatt", "whispercpp-stream"
  std::string detail;  // model file and settings
  std::vector<FileResult> files;
  std::vector<SessionResult> sessions;
  ErrorCounts words, characters;
  Distribution delay, provisional_delay, first_word_delay, first_word_provisional_delay;
  double audio_seconds = 0;         // all streams of all sessions
  double elapsed_wall_seconds = 0;  // whole run
  double compute_wall_seconds = 0;  // inside processor calls, all streams
  std::optional<double> cpu_seconds;
  std::optional<long> peak_rss_bytes;
  std::string peak_rss_scope;  // how peak RSS was measured
  ComputeStats compute;
  long future_timestamps = 0;
  long failed_streams = 0;
  std::optional<TranslationSummary> translation;
  std::optional<DiarizationSummary> diarization;  // bench --diarization-model (diarization_metrics.h)
  std::optional<KeytermSummary> keyterms;         // bench --keyterms (keyterm_recall.h)

  double rtf_wall() const { return audio_seconds > 0 ? compute_wall_seconds / audio_seconds : 0; }
  std::optional<double> rtf_cpu() const;
  std::optional<double> encoder_ms_per_pass() const;
  std::optional<double> decoder_ms_per_pass() const;
  std::optional<double> passes_per_audio_second() const;
  std::optional<double> decoder_calls_per_pass() const;  // tokens per pass, greedy (+1 per language detection)
};

SystemResult summarize(const std::string& name, const SystemRun& run, const std::vector<Utterance>& utterances,
                       Pacing pacing, NormalizerKind normalizer);

}  // namespace earshot::bench

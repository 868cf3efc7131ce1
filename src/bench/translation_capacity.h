// How many sessions' translation one machine sustains. N translation stages of
// one TranslationService (the live path: its bounded pool of
// --translation-workers threads, each stage's jobs in order, a stage that falls
// behind keeps only its newest draft) are fed a scripted ASR output in real
// time from one feeder thread, as sessions' threads would feed them: every
// `emission_seconds` each stream commits the words spoken by then (at
// `words_per_second`, a sentence-ending period every `sentence_words`) and
// shows the next `tail_words` as provisional. Streams start staggered over one
// emission period. The ASR itself is not run: this measures translation alone.
//
// A run is sustained when every stream ended (its end is posted after its
// last final) within drain_limit of the last feed, its drafts kept coming (p90
// of the interval between a stream's successive draft events within
// draft_interval_limit, by default two emission periods) and the p90 final lag
// (final's arrival minus the wall time of its last source word's audio end, as
// `bench --translate-to` defines it; the emission period is in it) is within
// final_lag_limit. Skipped drafts are reported, not a criterion: an emission's
// committed-words draft superseded by its own tail's draft, queued right after
// it, is a skip by design that costs nothing.
#pragma once

#include <string>
#include <vector>

#include "bench/metrics.h"
#include "bench/runner.h"
#include "stages/translation/translation_stage.h"

namespace earshot::bench {

struct TranslationCapacityOptions {
  double stream_seconds = 30;
  double emission_seconds = 1.0;  // how often the ASR commits (a chunk)
  double words_per_second = 2.5;  // ~150 words a minute
  int sentence_words = 12;        // a period after every this many words
  int tail_words = 2;
  double final_lag_limit = 3.0;
  double draft_interval_limit = 0;  // 0: 2 x emission_seconds
  double drain_limit = 120;         // seconds after the last feed to wait for the finals
  std::string source_language = "en";
  std::string target_language = "zh";
  // The model translates by copying its source (bench/translation_reference.h):
  // the committed target then says which source words it covers, and each
  // word's committed-target delay is measured (else it is not).
  bool target_copies_source = false;
};

struct TranslationCapacityRun {
  int sessions = 0;
  double audio_seconds = 0;  // all streams
  double wall_seconds = 0;   // first feed to the last stream's end
  long draft_calls = 0, final_calls = 0, skipped_drafts = 0;
  stages::translation::TranslationCounts counts;  // this run's share of the service's counts (tokens by kind)
  long finals_arrived = 0;                        // one per closed segment
  Distribution final_lag;
  Distribution draft_interval;  // seconds between a stream's successive draft events (its update rate)
  // With target_copies_source: per source word, its committed translation's
  // arrival (a TranslationCommitted, else the segment's final) minus the
  // feed that committed the word (0 when the translation came first: the
  // commit rule may run one token ahead of the committed source). The delay
  // WhisperLiveKit's simultaneous-translation presets state.
  Distribution commit_delay;
  long off_reference_segments = 0;  // segments whose committed target was not a prefix of their source
  bool drained = true;              // every stream ended within drain_limit
  bool sustained = false;
};

// One run of `sessions` streams on `service`. `clock` (null: a SteadyClock) is when
// the feeder feeds and when each event arrived; a test's clock steps instead of
// waiting. drain_limit stays real time: under a stepped clock it only guards
// against a hang.
TranslationCapacityRun run_translation_capacity(const stages::translation::TranslationService& service, int sessions,
                                                const TranslationCapacityOptions& options, Clock* clock = nullptr);

// The scripted source of one stream: word i (0-based) spans
// [i / rate, (i + 0.8) / rate) seconds; its text comes from a fixed English
// passage, with a period after every sentence_words-th word.
std::vector<Word> scripted_source(const TranslationCapacityOptions& options);

}  // namespace earshot::bench

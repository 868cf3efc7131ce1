// `earshot bench --translate-to LANG`: each ASR stream's output (its committed
// words and, per emission, the provisional tail) replayed through a fresh
// synchronous translation stage, and what the translation's reader sees:
//
//  * first-draft delay, per segment: when its first target text (draft or
//    committed) appeared, minus the audio end of the segment's first source word;
//  * commit delay, per committed target word (whitespace-separated; a CJK
//    character is a word of its own): when its last piece was committed, minus
//    the audio end of the newest source word committed by then (the word whose
//    commit released it);
//  * final lag, per segment: when its full translation arrived, minus the audio
//    end of its last source word;
//  * MT calls per minute of audio: the translation model calls the stage made,
//    drafts (simultaneous mode's drafting calls, every draft job run: the
//    synchronous stage skips none, where a live pool behind would) and finals
//    (one full translation per closed segment) counted apart;
//  * chrF (chrf.h) of the finals against AUDIO.LANG.txt references, when the
//    dataset has them.
//
// Clocks as for the ASR delays (metrics.h): as fast as possible, the audio clock
// of the emission that fed the stage (translation compute excluded); realtime,
// the emission's wall time on a translation worker of the stream's own: each
// emission's translation starts when the emission is out and the worker is
// free, and the model time it took is added (queueing behind other sessions,
// and the live pool's skipped drafts, are --capacity's business). Word ends are
// clamped to the audio fed when they were committed, so no delay is negative.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/chrf.h"
#include "bench/metrics.h"
#include "bench/runner.h"
#include "stages/stage.h"

namespace earshot::bench {

struct TranslationTrace {
  std::vector<double> first_draft_delays;  // per segment that showed target text before its final
  std::vector<double> commit_delays;       // per committed target word, in order
  std::vector<double> final_lags;          // per closed segment
  std::vector<std::string> committed_words;
  std::string translation;  // the segments' finals, joined by spaces
  double compute_seconds = 0;
  double audio_seconds = 0;  // of the stream
  long draft_calls = 0;      // model calls while this stream was fed
  long final_calls = 0;
};

// The model calls made so far, as (draft calls, final calls): a translation
// service's counts (TranslationService::counts()).
using CallCounter = std::function<std::pair<long, long>()>;

// Feeds `trace` (tails used when it kept them) through `stage`, a fresh
// synchronous translation stage (TranslationService::make_synchronous_stage);
// `calls`, when given, is read before and after to count this stream's calls.
TranslationTrace translate_trace(const StreamTrace& trace, stages::Stage& stage, Pacing pacing, Clock& clock,
                                 const CallCounter& calls = {});

// TranslationSummary: metrics.h. `references[i]` is stream i's reference translation ("" = none).
TranslationSummary summarize_translation(const std::string& target_language,
                                         const std::vector<TranslationTrace>& traces,
                                         const std::vector<std::string>& references);

}  // namespace earshot::bench

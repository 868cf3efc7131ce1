// Translation as a stage of a session's chain. The stage segments the committed
// source (punctuation after the soft maximum, always at the hard maximum, long
// pauses at their end, flushes and the end of the stream) and hands the work to
// a worker pool shared by every session, so the session's thread never waits
// for the model: drafts (committed target + provisional draft) and each closed
// segment's full translation come back as events through the session's post
// path. A stage that falls behind skips drafts (only the newest waits, and
// none of a segment whose final is queued), never
// finals. One loaded model serves every stage; each stage owns its engine.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/llm/llm_backend.h"
#include "stages/stage.h"
#include "stages/translation/calibration.h"
#include "stages/translation/engine.h"
#include "stages/worker_pool.h"

namespace earshot::stages::translation {

// The shared pool of translation model calls (stages/worker_pool.h).
using WorkerPool = stages::WorkerPool;

struct TranslationOptions {
  std::string target_language;  // "" = no translation
  CommitOptions commit;
  double soft_max_seconds = 4.0;   // punctuation closes a segment once it has run this long
  double hard_max_seconds = 20.0;  // a segment this long closes at the next committed word
  double pause_seconds = 5.0;      // a finished pause at least this long closes (the session's threshold)
  int redraft_source_tokens = 2;
  int max_new_tokens = 256;
  double draft_tokens_per_source = 2.0;  // EngineOptions: a draft's budget fitted to its source (0: off)
  int draft_token_slack = 6;
  bool verify_drafts = true;  // EngineOptions: re-drafts and finals verify the last draft in one batch
  // A draft job that re-drafts first sends what the cached draft already
  // commits for the newly committed source (TranslationEngine::update's
  // `early`), rather than after the model call. Stages on a pool only (a
  // synchronous stage's events all go out together anyway). Off: commits come
  // from the new draft only, after its call (WhisperLiveKit #426's order).
  bool release_first = true;
  int context_tokens = 4096;
  int threads = 0;
};

// What the stages of one service did, all streams together: model calls by
// kind (drafts: simultaneous mode's drafting calls; finals: a closed segment's
// full translation) and draft jobs dropped unrun because a newer draft of the
// same stage, or their segment's final, was queued behind them (pool stages
// only; finals are never dropped).
struct TranslationCounts {
  long draft_calls = 0;
  long final_calls = 0;
  long skipped_drafts = 0;
  // Tokens of those calls, as EngineStats counts them (all stages together).
  long prompt_decoded = 0, prompt_reused = 0;
  long proposed = 0, accepted = 0;
  long generated = 0, stepped = 0;
  long calls() const { return draft_calls + final_calls; }
};

// What every session's stage shares: the model, the registry, the pool.
class TranslationService {
 public:
  TranslationService(std::shared_ptr<const llm::LlmModel> model, CalibrationRegistry registry, int workers,
                     TranslationOptions defaults);
  // A stage for one stream. `source_language` "auto" or "": decided at the
  // first committed word's language. Options from the service's defaults with
  // this target language.
  std::unique_ptr<Stage> make_stage(const std::string& source_language, const std::string& target_language) const;
  std::unique_ptr<Stage> make_stage(const std::string& source_language, const TranslationOptions& options) const;
  // The same without the pool: every job runs inside consume(), in order, none
  // skipped (deterministic: replay, file transcription, tests).
  std::unique_ptr<Stage> make_synchronous_stage(const std::string& source_language,
                                                const TranslationOptions& options) const;
  // Each stage made from now on calls this with every event it consumes
  // (record/replay: the stage's full input stream).
  void set_input_observer(std::function<void(const events::Event&)> observer) { observer_ = std::move(observer); }
  const TranslationOptions& defaults() const { return defaults_; }
  const llm::LlmModel& model() const { return *model_; }
  std::shared_ptr<const llm::LlmModel> shared_model() const { return model_; }
  const CalibrationRegistry& registry() const { return *registry_; }
  // Where warnings go (simultaneous mode off for lack of a calibration...); stderr by default.
  void set_warning_sink(std::function<void(const std::string&)> sink) { warn_ = std::move(sink); }
  // Since the service was made; safe to read while stages run.
  TranslationCounts counts() const;
  // Blocks until no stage's job is queued or running: every event of the jobs
  // submitted so far has been posted (a stepped clock's settling point).
  void wait_idle() const;

  struct Counters;

 private:
  std::shared_ptr<const llm::LlmModel> model_;
  std::shared_ptr<const CalibrationRegistry> registry_;
  std::shared_ptr<WorkerPool> pool_;
  TranslationOptions defaults_;
  std::function<void(const std::string&)> warn_;
  std::function<void(const events::Event&)> observer_;
  std::shared_ptr<Counters> counters_;
};

// The segmentation rules alone (the stage's session-thread part), testable
// without a model: feed events, read which segments closed.
struct SegmentClose {
  int segment = 0;
  double start = 0;
  double end = 0;
  std::string source;
};
class Segmenter {
 public:
  explicit Segmenter(const TranslationOptions& options) : options_(options) {}
  // Returns the segments `event` closes (in order); updates the open segment.
  std::vector<SegmentClose> on_event(const events::Event& event);
  int segment() const { return segment_; }
  double start() const { return start_; }
  const std::string& committed() const { return committed_; }
  // The tail without words the commit boundary already passed (stale).
  std::string tail() const;
  std::string language() const { return language_; }

 private:
  SegmentClose close();
  TranslationOptions options_;
  int segment_ = 0;
  double start_ = -1;  // of the open segment's first word, -1 = empty
  double end_ = 0;
  double committed_until_ = 0;
  std::string committed_;
  std::vector<Word> tail_;
  std::string language_;
};

}  // namespace earshot::stages::translation

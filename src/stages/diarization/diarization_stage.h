// The diarization stage: who spoke each word. It hears the stream's audio
// (Stage::audio, every sample the ASR's VAD sees), runs an ActivitySource over
// it in the source's own chunks, and gives each committed word the speaker of
// the frames around it (assign.h). Words are never held back: WordsCommitted
// passes at once with speakers_pending, and SpeakersAssigned names their
// speakers once the frames reach `nearest_seconds` past a word's end (or the
// stream ended): that, plus the source's own chunking, is the delay the speaker
// fields have. Provisional words carry the speaker the frames so far suggest.
//
// Live streams run the source on a shared WorkerPool, one job per stream at a
// time, so transcription never waits for it; audio waiting for the source is
// bounded (max_queue_seconds: beyond it the oldest waiting audio is dropped and
// counted, and the words in it get the nearest speaker or none). Files (no
// pool) run the source in order on the session's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "stages/diarization/activity.h"
#include "stages/diarization/assign.h"
#include "stages/stage.h"
#include "stages/worker_pool.h"

namespace earshot::stages::diarization {

struct DiarizationOptions {
  SpeakerRule rule;
  double max_queue_seconds = 30.0;  // live: audio waiting for the source beyond this is dropped
};

// What the stages of one loaded model did, all streams together (serve's /metrics).
struct DiarizationCounters {
  std::atomic<int64_t> queued_samples{0};     // waiting for the source now
  std::atomic<int64_t> dropped_samples{0};    // dropped because a stream's source fell behind
  std::atomic<int64_t> processed_samples{0};  // pushed through the source
  std::atomic<int64_t> compute_microseconds{0};
  std::atomic<int64_t> words{0};          // committed words given a speaker or found unknown
  std::atomic<int64_t> unknown_words{0};  // of those, unknown
};

// One stream's figures now, seconds of audio (bench --capacity samples them as
// the stage's lag beside the ASR's).
struct DiarizationProgress {
  double received_seconds = 0;  // handed to the stage (audio())
  double dropped_seconds = 0;   // of it, dropped because the source fell behind
  double diarized_seconds = 0;  // of the rest, turned into speaker frames by the source
  double compute_seconds = 0;   // wall time inside the source (its steps and its finish)
  // Audio received and neither dropped nor diarized yet: waiting in the queue,
  // held by the source for its chunk, or in its step now.
  double lag_seconds() const;
};

class DiarizationStage : public Stage {
 public:
  // pool null: synchronous (files).
  DiarizationStage(std::unique_ptr<ActivitySource> source, DiarizationOptions options, std::shared_ptr<WorkerPool> pool,
                   std::shared_ptr<DiarizationCounters> counters);
  ~DiarizationStage() override;
  DiarizationStage(const DiarizationStage&) = delete;
  DiarizationStage& operator=(const DiarizationStage&) = delete;

  void attach(Post post) override;
  void audio(std::span<const float> samples, double start) override;
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override;
  // This stream's figures now; any thread.
  DiarizationProgress progress() const;

 private:
  struct Shared;
  static void run_jobs(const std::shared_ptr<Shared>& shared);
  std::shared_ptr<WorkerPool> pool_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace earshot::stages::diarization

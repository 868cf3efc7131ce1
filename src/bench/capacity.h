// `earshot bench --capacity`: how many real-time streams one machine carries.
// N sessions run the server's pipeline without the network: each a
// session::StreamSession (Silero VAD -> policy -> events -> stages) stepped by
// one session::Scheduler over W worker threads, fed in real time from one
// feeder thread (every chunk when it is due, as a client sends it) that also
// samples each session's status every 0.1 s and renders the WhisperLiveKit
// update a server would send when it changed (the protocol's cost).
//
// Lag = received - processed seconds of a session (StreamStatus): the audio
// waiting for the model, i.e. how far the model is behind real time; the
// policy's own hold-back is not in it (the bench's word delays are).
// A run is within capacity when every session's p95 lag is under the limit
// (`earshot bench --capacity`: the chunk + 0.5 s, or --lag-limit), no audio
// was skipped and no session failed.
//
// With a diarization stage in the sessions' chains (serve's, opened for a live
// stream: its source on the loaded stage's shared pool), each session also has
// the stage's lag (stages::diarization::DiarizationProgress::lag_seconds():
// audio the stage received and neither dropped nor turned into speaker frames
// yet, sampled with the ASR's), the audio it dropped, its compute, and each
// committed word's speaker delay (its WordsCommitted to its SpeakersAssigned on
// the run's clock, seen by a probe stage after the chain). Such a run is within
// capacity when, besides the ASR's rule, every session's diarization p95 lag is
// under the diarization limit (earshot bench: the source's chunk + the ASR's lag limit, or
// --diarization-lag-limit) and no diarization audio was dropped (within()).
//
// Time comes from a bench::Clock (null: the steady clock): when the feeder
// feeds and samples, the sessions' own clock, and every profile timer. A test
// passes a virtual clock that moves only when the run's workers are idle or
// waiting on it, so its lags and profile are exact, not measured.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/runner.h"
#include "model/asr_decoder.h"
#include "model/model_pass.h"
#include "policy/online_processor.h"
#include "session/scheduler.h"
#include "session/stream_session.h"
#include "session/voice_activity.h"
#include "stages/stage.h"

namespace earshot::bench {

// Where a stream's compute went, seconds (--profile). encoder excludes mel.
struct StageTimes {
  double mel = 0, vad = 0, encoder = 0, decoder = 0, policy = 0, protocol = 0;
  long encoder_passes = 0, decoder_calls = 0;
  double total() const { return mel + vad + encoder + decoder + policy + protocol; }
  StageTimes& operator+=(const StageTimes& o);
};

// Raw counters one stream's decorators fill; to_stage_times() derives the split.
struct ProfileCounters {
  double processor = 0;  // inside every OnlineProcessor call (policy + model)
  double passes_encoder = 0, passes_decoder = 0;
  double mel_probe = 0;  // the log-mel recomputed on each encoder pass's audio
  double vad = 0, protocol = 0;
  long encoder_passes = 0, decoder_calls = 0;
  StageTimes to_stage_times() const;
};

// Counts model passes into `counters` (engine::StreamRequest::on_pass; the
// engine times them itself, on the steady clock).
PassReport profile_passes(std::shared_ptr<ProfileCounters> counters);
// The decorators below time on `clock` (null: the steady clock).
// An AsrDecoder decorator that times a recomputation of each encoder pass's
// log-mel (80 bins, as the encoder computes it, one thread) before forwarding:
// the encoder's own mel cannot be timed from outside the model.
std::unique_ptr<AsrDecoder> probe_mel(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ProfileCounters> counters,
                                      Clock* clock = nullptr);
// Times every call into the processor.
std::unique_ptr<OnlineProcessor> time_processor(std::unique_ptr<OnlineProcessor> inner,
                                                std::shared_ptr<ProfileCounters> counters, Clock* clock = nullptr);
// Times the VAD's work.
session::VadFactory time_vad(session::VadFactory inner, std::shared_ptr<ProfileCounters> counters,
                             Clock* clock = nullptr);

struct CapacityStream {
  std::unique_ptr<OnlineProcessor> processor;
  std::shared_ptr<ProfileCounters> counters;  // may be null (no --profile)
  // The session's stage chain, as serve opens it for a live stream (may be empty).
  std::vector<std::unique_ptr<stages::Stage>> stages;
};
using CapacityFactory = std::function<CapacityStream(int session)>;

struct CapacityOptions {
  int workers = 2;
  session::PassThreadPolicy pass_threads;  // threads per pass, what a lone pass may borrow (none by default)
  double chunk_seconds = 0.5;
  session::StreamOptions stream;
  std::function<session::VadFactory(std::shared_ptr<ProfileCounters>)> vad;  // null: no VAD
  // The scheduler the sessions run on (null: the run's own, of `workers`
  // threads). A test that steps a virtual clock owns it to see when it is idle.
  session::Scheduler* scheduler = nullptr;
};

// A session's diarization stage over the run (seconds).
struct DiarizationFigures {
  double p95_lag = 0, max_lag = 0;     // the stage's lag, sampled every 0.1 s while the session ran
  double received_seconds = 0;         // audio the stage was handed
  double dropped_seconds = 0;          // of it, dropped because the source fell behind
  double compute_seconds = 0;          // wall time inside its source
  long words = 0;                      // committed words awaiting a speaker from the stage
  std::vector<double> speaker_delays;  // per such word given one: its commit to its SpeakersAssigned

  // A percentile (0..1) of speaker_delays; nullopt without any.
  std::optional<double> speaker_delay(double p) const;
};

struct SessionFigures {
  double audio_seconds = 0;
  double p95_lag = 0, max_lag = 0;
  double skipped_seconds = 0;
  double processed_at_feed_end = 0;  // stream seconds the model had taken when the last audio arrived
  double drain_seconds = 0;          // last audio -> session finished
  std::string error;
  std::optional<DiarizationFigures> diarization;  // with a diarization stage
};

// An engine's batching of steps across streams during one run (its counts
// after minus before; max_batch is the largest batch since the model loaded).
struct BatchFigures {
  long long steps = 0, graphs = 0, max_batch = 0;
  double mean_batch() const { return graphs > 0 ? static_cast<double>(steps) / static_cast<double>(graphs) : 0; }
};

struct CapacityRun {
  int sessions = 0, workers = 0;
  std::vector<SessionFigures> per_session;
  double elapsed_seconds = 0;
  double rss_before_bytes = 0, rss_peak_bytes = 0;
  std::optional<StageTimes> profile;     // summed over sessions
  std::optional<BatchFigures> batching;  // set by the caller for an engine that batches streams
  double audio_seconds = 0;              // all sessions

  double max_p95_lag() const;
  double max_lag() const;            // over sessions
  double max_drain_seconds() const;  // over sessions
  double skipped_seconds() const;
  // max / min processed audio across sessions when the feed ended (1 = even).
  double fairness() const;
  double memory_per_session_bytes() const;

  // The diarization's figures over sessions; 0 (or false) without it.
  bool diarized() const;                       // some session had a diarization stage
  double max_diarization_p95_lag() const;      // over sessions
  double max_diarization_lag() const;          // over sessions
  double diarization_dropped_seconds() const;  // summed
  // A percentile (0..1) of every session's speaker delays together; nullopt without any.
  std::optional<double> speaker_delay(double p) const;
  long speaker_delay_words() const;  // words that have a speaker delay
  // The stage's compute seconds per second of audio it was handed, all sessions together.
  double diarization_compute_per_audio_second() const;

  // The pass rule: every session without an error, nothing skipped and its p95
  // lag under lag_limit; with diarization also its diarization p95 lag under
  // diarization_lag_limit and no diarization audio dropped.
  bool within(double lag_limit, double diarization_lag_limit = INFINITY) const;
};

// Streams `audio[s]` through session s in real time (s = 0..audio.size()-1) on
// `clock` (null: the steady clock). The feeder's ticks are clock->sleep_until
// calls at 0.1 s steps from the run's start.
CapacityRun run_capacity(const CapacityFactory& factory, const std::vector<std::vector<float>>& audio,
                         const CapacityOptions& options, Clock* clock = nullptr);

// Resident set size of this process now (VmRSS), bytes; 0 when unknown.
double resident_bytes();

}  // namespace earshot::bench

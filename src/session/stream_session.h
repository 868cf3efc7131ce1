// One audio stream turned into transcript events: audio in -> VAD -> online
// processor -> events (committed words, provisional tail, speech start/end,
// pauses, language, errors, end of stream) -> the session's stages -> an
// append-only event log, plus the live status figures (lag). The network side
// pushes audio and reads events and status; the scheduler runs step() (the
// model work) on its worker threads, never two at once for one session.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/sample_rate.h"
#include "events/event.h"
#include "policy/online_processor.h"
#include "session/voice_activity.h"
#include "stages/stage.h"

namespace earshot::session {

struct StreamOptions {
  // Pauses at least this long are Pause events (silence lines of the protocols).
  double pause_segmentation_seconds = 5.0;
  // A step waits for at least this much new audio (unless the stream ended).
  double min_step_seconds = 0.1;
  // The same while the VAD has an end of speech pending (VoiceActivityDetector::
  // end_pending): each of Silero's 32 ms windows may decide it, and such a step
  // runs only the VAD (no model pass), so the flush starts once the end is decided.
  double end_pending_step_seconds = 0.032;
  // A pending end makes the session urgent (urgent()) only while at most this much
  // audio waits: a session that far behind, or a whole file pushed at once, is no
  // live turn about to end.
  double urgent_max_waiting_seconds = 1.0;
  // The most audio one step hands to the model: a session that fell behind
  // processes chunks up to this size instead of many small ones.
  double max_step_seconds = 10.0;
  // Audio waiting for the model is bounded. A client paced in real time whose
  // session fell this far behind loses the oldest waiting audio (skipped as a
  // gap, announced by an AudioSkipped event) so the stream stays live. A client
  // sending faster than real time (a recording streamed as fast as it can) is
  // held back instead: accepting_audio() turns false at this limit and the
  // transport stops reading until the model caught up, so nothing is lost.
  // 0 = unbounded (whole-file transcription, where the upload limit bounds it).
  double max_pending_seconds = 60.0;
  // A client counts as sending faster than real time once the audio it sent
  // exceeds the wall time since its first audio by this much (a real-time
  // client stays within its message length plus network jitter of it).
  double ahead_tolerance_seconds = 2.0;
  // A model pass in flight stops when the speaker stops (its audio goes to the
  // flush) or when another stream's flush needs the cores (common/pass_stop.h).
  // Off: every pass runs to its end and the VAD hears no audio ahead of the
  // step, so with fixed steps (min_step_seconds = max_step_seconds) a stream's
  // words depend on its audio only, never on timing.
  bool stop_passes = true;
};

// The live figures of a stream at one moment (what a protocol's lag fields need).
struct StreamStatus {
  double received_seconds = 0;   // stream time of all audio received
  double processed_seconds = 0;  // stream time handed to the model / VAD
  double committed_until = 0;    // end of committed words (or covered silence)
  double transcribed_until = 0;  // end of committed + provisional words (or covered silence)
  double wall_seconds_since_first_audio = 0;
  double skipped_seconds = 0;  // audio skipped because the session fell too far behind
  bool sender_ahead = false;   // the client sends faster than real time (held back, never skipped)
  bool finished = false;       // end of stream fully processed
  std::string error;           // non-empty when the session failed
  uint64_t version = 0;        // bumps on every state change
  // Stream time of all audio the VAD has run over (finished steps): ahead of
  // processed_seconds by the VAD's look-ahead, which the model waits for but an
  // end of speech the VAD has decided does not (the clock endpoints count on).
  double heard_seconds = 0;

  // Lag figures of the protocol (seconds, rounded to 0.1, never negative).
  double lag_transcription() const;
  double lag_processing() const;
  double lag_policy() const;
};

// Events of the log from index `next - events.size()` to `next` (exclusive), and
// the status at the same moment (taken under the same lock, so a status that says
// finished comes with every event of the stream).
struct EventBatch {
  std::vector<events::Event> events;
  uint64_t next = 0;  // the cursor to pass to the next events_since()
  StreamStatus status;
};

// All model-side counters a session contributes to (for /metrics).
struct SessionStats {
  uint64_t passes = 0;
  // Passes stopped in flight (common/pass_stop.h): the speech may have ended
  // (their audio goes to the flush), or another stream's flush took the cores
  // (their audio waits for the next pass). Not counted in `passes`.
  uint64_t stopped_passes = 0;
  double model_seconds = 0;
  double audio_seconds = 0;
};

class StreamSession {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // vad may be null: every sample is speech (--no-vac). Every event runs through
  // `stages` in order before it reaches the log; every step's audio reaches each
  // stage's audio() first (stages::Stage).
  StreamSession(std::unique_ptr<OnlineProcessor> processor, std::unique_ptr<VoiceActivityDetector> vad,
                StreamOptions options, Clock clock = {}, std::vector<std::unique_ptr<stages::Stage>> stages = {});
  ~StreamSession();
  StreamSession(const StreamSession&) = delete;
  StreamSession& operator=(const StreamSession&) = delete;

  // Network side. Audio after end_of_stream() or after a failure is ignored.
  void push_audio(std::span<const float> samples);
  // False while a client sending faster than real time has max_pending_seconds
  // of audio waiting: its transport should stop reading until this is true
  // again (backpressure). Always true for a client paced in real time, whose
  // oldest waiting audio is skipped instead, and once the stream ended or failed.
  bool accepting_audio() const;
  void end_of_stream();
  // Ends the session with an error (undecodable input...); the model is not run
  // again. Emits StreamError then EndOfStream.
  void fail(const std::string& message);
  // The client asks for a flush now: the steps hand the model the audio received
  // up to this call (audio received later waits for the following steps) and flush
  // it with last-pass semantics (as at a pause) without ending the stream, then
  // emit Finalized. Returns the request's number
  // (1, 2, ...; Finalized::requests reaches it once answered), 0 when the stream
  // has ended or failed (no Finalized will come).
  uint64_t finalize();
  // The client changes the stream's stage settings (Deepgram Flux's Configure):
  // `params` is the whole set (stages::StreamRequest::params names). The stages
  // check it now (Error(kInvalidArgument) naming a bad parameter, nothing changed);
  // it applies in audio order, as an events::SettingsChanged before the audio
  // received after this call. Returns what the stages will run with, as parameters
  // (empty when no stage has settings a stream can change). Nothing happens once
  // the stream has ended.
  std::map<std::string, std::string> change_settings(const std::map<std::string, std::string>& params);

  // The server gives up on the session before its model caught up (shutdown
  // grace over): no step starts after this call. The step running, if any,
  // completes and logs its events; stepping() tells when it has.
  void halt();
  bool stepping() const;

  // Scheduler side.
  bool has_work() const;
  // Whether the next step may end a turn: the VAD has an end of speech pending (and
  // the session is live: urgent_max_waiting_seconds), or a finalize() waits. The
  // scheduler runs such steps first (each is short or the flush a waiting client
  // wants now); the end of a stream is no reason (a whole file would go before
  // every live stream).
  bool urgent() const;
  // From another thread while this session waits for its step (a worker between
  // the nodes of another session's pass): the VAD hears the audio that arrived,
  // and true when it found an end of speech pending or decided (the session is
  // urgent() now). Does nothing while the session steps, without a VAD, and
  // with StreamOptions::stop_passes off.
  bool listen_waiting();
  // Urgent, and the next step does a flush's model work (a Finalize, or an end
  // pending whose flush was not worked out ahead): the scheduler makes way for
  // it. A step that only runs the VAD or decodes a prepared flush is not.
  bool flush_due() const;
  // Whether this session's passes may be stopped (StreamOptions::stop_passes).
  bool stops_passes() const { return options_.stop_passes; }
  // Runs VAD and the policy over the waiting audio (at most max_step_seconds);
  // the last step after end_of_stream() flushes. Never throws: failures end the
  // session with an error.
  void step();

  // Called (on the calling thread, no lock held) whenever the session may have
  // something new for its reader: after each step (new events, audio taken, the end),
  // after a stage posted events, after a failure. The reader then pulls with
  // events_since(); the listener must not block. One listener; it may be set or
  // replaced while the session is stepped (the transport watches after the
  // scheduler already holds the session).
  void set_listener(std::function<void()> listener);

  // The event log from `cursor` on (0 = from the start; pass back `next`).
  // Events before the oldest retained one (see release_until) are gone: the
  // batch then starts at the oldest retained event.
  EventBatch events_since(uint64_t cursor) const;
  // Drops the events before `cursor`: memory stays bounded on long streams when
  // the (single) reader releases what it has read. With several readers, pass
  // the smallest cursor of them all. Without releases the log keeps everything
  // (a file transcription reads it once at the end).
  void release_until(uint64_t cursor);
  StreamStatus status() const;
  uint64_t version() const;
  bool done() const;  // finished (every event in the log) or failed
  SessionStats stats() const;

 private:
  struct State;
  void run_step();
  // Runs `event` through the stages (serialised by chain_mutex_; not under mutex_).
  std::vector<events::Event> run_chain(events::Event event);
  // Every stage's advance(heard), each one's events through the stages after it.
  std::vector<events::Event> run_advance(double heard);
  // A stage's asynchronous events: through the stages from `first_stage` on, then the log.
  void post_from(size_t first_stage, std::vector<events::Event> events);
  // Appends to the log; mutex_ must be held. Nothing follows EndOfStream.
  void append_locked(std::vector<events::Event>& events);
  void status_locked(StreamStatus& out) const;
  // At most urgent_max_waiting_seconds of audio waits (a client feeding in real
  // time, not a file sent ahead); mutex_ must be held.
  bool live_locked() const;
  void feed_speech(std::span<const float> samples, int64_t end_sample);
  void commit(const std::vector<Word>& words);
  // LanguageDetected into `out` when the processor's language became known or changed.
  void note_language(std::vector<events::Event>& out);
  void begin_silence(int64_t at_sample);
  // heard = false: the "silence" was audio skipped (skip_gap), which is no Pause.
  void end_silence(int64_t at_sample, bool heard = true);
  // vad_skip: how much of the gap the VAD did not hear (the whole of it unless a
  // pass listened to some of it before it was dropped).
  void skip_gap(int64_t from_sample, int64_t to_sample, int64_t vad_skip);
  // Between the nodes of a stoppable model pass (common/pass_stop.h): the VAD
  // hears the audio that arrived since the step began; true (stop the pass) once
  // the speech may have ended, as the flush that follows would only wait for it.
  bool listen_during_pass();
  // The VAD hears the audio pushed since it last heard, once a window of it is
  // there (step_mutex_ held: the VAD and what it heard are the stepping thread's).
  void hear_pending();
  // The VAD has an end of the current speech pending, or heard it decided
  // (during a pass) at a position no step has reached yet.
  bool end_heard() const;
  void notify_listener();
  size_t pending_limit_samples() const;

  std::unique_ptr<OnlineProcessor> processor_;
  std::unique_ptr<VoiceActivityDetector> vad_;
  StreamOptions options_;
  Clock clock_;
  std::vector<std::unique_ptr<stages::Stage>> stages_;
  std::mutex chain_mutex_;
  // Held by step() throughout and by listen_waiting(): the worker-only state.
  std::mutex step_mutex_;
  mutable std::mutex mutex_;
  std::unique_ptr<State> state_;
  // Copied out under listener_mutex_ and called without it.
  std::mutex listener_mutex_;
  std::shared_ptr<const std::function<void()>> listener_;
};

}  // namespace earshot::session

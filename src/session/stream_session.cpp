#include "session/stream_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>

#include "common/error.h"
#include "common/pass_stop.h"

namespace earshot::session {

namespace {

// A pass's listener runs the VAD once this much new audio arrived (a Silero window).
constexpr size_t kListenSamples = 512;

double round_tenth(double seconds) { return std::max(0.0, std::round(seconds * 10.0) / 10.0); }

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double to_seconds(int64_t samples) { return static_cast<double>(samples) / kSampleRate; }

bool same_words(const std::vector<Word>& a, const std::vector<Word>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Word& x, const Word& y) {
    return x.text == y.text && x.start == y.start && x.end == y.end && x.probability == y.probability &&
           x.language == y.language && x.speaker == y.speaker;
  });
}

}  // namespace

double StreamStatus::lag_transcription() const {
  if (finished) return 0;
  return round_tenth(wall_seconds_since_first_audio - transcribed_until);
}
double StreamStatus::lag_processing() const { return round_tenth(received_seconds - processed_seconds); }
double StreamStatus::lag_policy() const {
  if (finished) return 0;
  return round_tenth(processed_seconds - committed_until);
}

struct StreamSession::State {
  // Shared with the network side (guarded by mutex_).
  std::vector<float> pending;
  int64_t received_samples = 0;
  int64_t consumed_samples = 0;   // taken by steps or skipped
  int64_t processed_samples = 0;  // fully handled by finished steps
  int64_t heard_samples = 0;      // run through the VAD by finished steps
  int64_t skipped_samples = 0;
  int64_t pending_gap = 0;  // oldest waiting samples dropped since the last step
  bool end_requested = false;
  bool sender_ahead = false;  // latched: the client sent faster than real time once
  bool halted = false;
  bool stepping = false;
  bool finished = false;
  std::string error;
  double first_audio_wall = -1;
  uint64_t version = 0;
  double provisional_end = 0;
  double committed_end = 0;
  SessionStats stats;
  bool finalize_requested = false;
  bool end_pending = false;  // after the last step: the VAD has an end of speech pending
  // ... and the next step does a flush's model work: its flush was not worked out
  // ahead (the scheduler makes way for it).
  bool flush_due = false;
  uint64_t finalize_requests = 0;  // finalize() calls so far
  // Each pending finalize() call: the stream position (samples received, skipped ones
  // counted) it flushes at, and its number. A step stops at the first one's position,
  // so audio received after a request is not flushed with it.
  std::deque<std::pair<int64_t, uint64_t>> finalize_at;
  // Each pending change_settings() call: the stream position it applies at, and the set.
  std::deque<std::pair<int64_t, std::map<std::string, std::string>>> settings_at;
  std::deque<events::Event> log;
  uint64_t log_base = 0;    // index of log.front() since the stream started
  bool log_closed = false;  // EndOfStream is in the log
  // A stage's posted events wait here while the session thread holds staged
  // events not yet in the log (chain_pending): they follow those, so a stage's
  // output never precedes the events it answers.
  bool chain_pending = false;
  std::vector<events::Event> posted;

  // Worker-only (one step at a time).
  bool in_speech = true;
  int64_t silence_start = 0;
  int64_t vad_offset = 0;  // stream sample of the VAD's sample 0 (skipped gaps shift it)
  int64_t vad_heard = 0;   // stream sample up to which the VAD has heard (a pass listens ahead)
  // Events the VAD reported (at stream samples) that no step has reached yet:
  // heard by a pass's listener ahead of the step's audio.
  std::deque<VadEvent> heard_events;
  std::vector<float> held;  // audio the VAD has not decided on yet
  int64_t held_start = 0;   // stream sample of held[0]
  bool fed_since_process = false;
  bool flush_prepared = false;  // prepare_flush() ran and no audio was fed since
  // The processor flushed (a pause, a finalize) and was fed nothing since: the end
  // of the stream has nothing left to decode (a second last pass over the audio it
  // keeps would only repeat or invent words after a turn that already ended).
  bool flushed = false;
  uint64_t passes = 0;
  uint64_t stopped_passes = 0;
  std::vector<Word> provisional;  // the tail of the last ProvisionalChanged
  std::string language;           // of the last LanguageDetected
  double pause_emitted_end = -1;  // end of the ongoing Pause last emitted, -1 = none
};

StreamSession::StreamSession(std::unique_ptr<OnlineProcessor> processor, std::unique_ptr<VoiceActivityDetector> vad,
                             StreamOptions options, Clock clock, std::vector<std::unique_ptr<stages::Stage>> stages)
    : processor_(std::move(processor)),
      vad_(std::move(vad)),
      options_(options),
      clock_(clock ? std::move(clock) : Clock(steady_now)),
      stages_(std::move(stages)),
      state_(std::make_unique<State>()) {
  if (!processor_) throw Error(ErrorCode::kInternal, "StreamSession needs an online processor");
  for (const auto& stage : stages_)
    if (!stage) throw Error(ErrorCode::kInternal, "StreamSession got a null stage");
  for (size_t i = 0; i < stages_.size(); ++i)
    stages_[i]->attach([this, i](std::vector<events::Event> events) { post_from(i + 1, std::move(events)); });
  // With a VAD the stream starts in silence: nothing reaches the model before speech.
  state_->in_speech = vad_ == nullptr;
}

// Stages first: one still working on its own thread may post until it is gone.
StreamSession::~StreamSession() { stages_.clear(); }

void StreamSession::set_listener(std::function<void()> listener) {
  auto shared = listener ? std::make_shared<const std::function<void()>>(std::move(listener)) : nullptr;
  std::lock_guard lock(listener_mutex_);
  listener_ = std::move(shared);
}

void StreamSession::notify_listener() {
  std::shared_ptr<const std::function<void()>> listener;
  {
    std::lock_guard lock(listener_mutex_);
    listener = listener_;
  }
  if (listener) (*listener)();
}

void StreamSession::post_from(size_t first_stage, std::vector<events::Event> events) {
  {
    std::lock_guard chain_lock(chain_mutex_);
    for (size_t i = first_stage; i < stages_.size(); ++i) {
      std::vector<events::Event> next;
      const std::function<void(events::Event)> emit = [&next](events::Event e) { next.push_back(std::move(e)); };
      for (const events::Event& e : events) stages_[i]->consume(e, emit);
      events = std::move(next);
    }
  }
  {
    std::lock_guard lock(mutex_);
    if (state_->chain_pending) {  // they follow the session thread's events, which notifies
      for (events::Event& e : events) state_->posted.push_back(std::move(e));
      return;
    }
    append_locked(events);
  }
  notify_listener();
}

void StreamSession::push_audio(std::span<const float> samples) {
  std::lock_guard lock(mutex_);
  State& s = *state_;
  if (s.end_requested || !s.error.empty() || samples.empty()) return;
  const double now = clock_();
  if (s.first_audio_wall < 0) s.first_audio_wall = now;
  s.pending.insert(s.pending.end(), samples.begin(), samples.end());
  s.received_samples += static_cast<int64_t>(samples.size());
  if (to_seconds(s.received_samples) > now - s.first_audio_wall + options_.ahead_tolerance_seconds)
    s.sender_ahead = true;
  if (options_.max_pending_seconds > 0) {
    // A sender held back is no longer read at the limit (accepting_audio); should its
    // transport read on regardless, memory still stays bounded, at twice the limit.
    const size_t limit = pending_limit_samples() * (s.sender_ahead ? 2 : 1);
    if (s.pending.size() > limit) {
      size_t drop = s.pending.size() - limit;
      s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(drop));
      s.pending_gap += static_cast<int64_t>(drop);
    }
  }
  ++s.version;
}

size_t StreamSession::pending_limit_samples() const {
  return static_cast<size_t>(options_.max_pending_seconds * kSampleRate);
}

bool StreamSession::accepting_audio() const {
  std::lock_guard lock(mutex_);
  const State& s = *state_;
  if (!s.sender_ahead || options_.max_pending_seconds <= 0 || s.end_requested || !s.error.empty() || s.halted)
    return true;
  return s.pending.size() < pending_limit_samples();
}

void StreamSession::halt() {
  std::lock_guard lock(mutex_);
  state_->halted = true;
  ++state_->version;
}

bool StreamSession::stepping() const {
  std::lock_guard lock(mutex_);
  return state_->stepping;
}

void StreamSession::end_of_stream() {
  std::lock_guard lock(mutex_);
  if (state_->end_requested) return;
  state_->end_requested = true;
  ++state_->version;
}

void StreamSession::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (!state_->error.empty() || state_->finished) return;
    state_->error = message;
    state_->pending.clear();
    ++state_->version;
  }
  // A stage that throws here still lets the error reach the log, unstaged.
  std::vector<events::Event> out;
  for (events::Event event : {events::Event(events::StreamError{message}), events::Event(events::EndOfStream{})}) {
    try {
      std::vector<events::Event> staged = run_chain(event);
      out.insert(out.end(), staged.begin(), staged.end());
    } catch (const std::exception&) {
      out.push_back(std::move(event));
    }
  }
  {
    std::lock_guard lock(mutex_);
    append_locked(out);
    if (!state_->log_closed) {  // a stage held EndOfStream back: the log still ends
      std::vector<events::Event> end{events::EndOfStream{}};
      append_locked(end);
    }
  }
  notify_listener();
}

uint64_t StreamSession::finalize() {
  std::lock_guard lock(mutex_);
  State& s = *state_;
  if (s.end_requested || s.finished || !s.error.empty()) return 0;
  s.finalize_requested = true;
  ++s.version;
  ++s.finalize_requests;
  s.finalize_at.emplace_back(s.consumed_samples + s.pending_gap + static_cast<int64_t>(s.pending.size()),
                             s.finalize_requests);
  return s.finalize_requests;
}

std::map<std::string, std::string> StreamSession::change_settings(const std::map<std::string, std::string>& params) {
  std::map<std::string, std::string> effective;
  for (const auto& stage : stages_) effective.merge(stage->check_settings(params));  // throws for a bad set
  std::lock_guard lock(mutex_);
  State& s = *state_;
  if (s.end_requested || s.finished || !s.error.empty()) return effective;
  s.settings_at.emplace_back(s.consumed_samples + s.pending_gap + static_cast<int64_t>(s.pending.size()), params);
  ++s.version;
  return effective;
}

std::vector<events::Event> StreamSession::run_chain(events::Event event) {
  std::vector<events::Event> current{std::move(event)};
  if (stages_.empty()) return current;
  {
    std::lock_guard lock(mutex_);
    state_->chain_pending = true;  // until the next append_locked
  }
  std::lock_guard chain_lock(chain_mutex_);
  for (const auto& stage : stages_) {
    std::vector<events::Event> next;
    const std::function<void(events::Event)> emit = [&next](events::Event e) { next.push_back(std::move(e)); };
    for (const events::Event& e : current) stage->consume(e, emit);
    current = std::move(next);
  }
  return current;
}

std::vector<events::Event> StreamSession::run_advance(double heard) {
  std::vector<events::Event> current;
  if (stages_.empty()) return current;
  {
    std::lock_guard lock(mutex_);
    state_->chain_pending = true;  // until the next append_locked
  }
  std::lock_guard chain_lock(chain_mutex_);
  for (const auto& stage : stages_) {
    std::vector<events::Event> next;
    const std::function<void(events::Event)> emit = [&next](events::Event e) { next.push_back(std::move(e)); };
    for (const events::Event& e : current) stage->consume(e, emit);
    stage->advance(heard, emit);
    current = std::move(next);
  }
  return current;
}

void StreamSession::append_locked(std::vector<events::Event>& events) {
  State& s = *state_;
  for (events::Event& e : events) {
    if (s.log_closed) break;
    s.log_closed = std::holds_alternative<events::EndOfStream>(e);
    s.log.push_back(std::move(e));
  }
  events.clear();
  s.chain_pending = false;
  for (events::Event& e : s.posted) {
    if (s.log_closed) break;
    s.log_closed = std::holds_alternative<events::EndOfStream>(e);
    s.log.push_back(std::move(e));
  }
  s.posted.clear();
  ++s.version;
}

EventBatch StreamSession::events_since(uint64_t cursor) const {
  std::lock_guard lock(mutex_);
  const State& s = *state_;
  EventBatch batch;
  const uint64_t from = std::max(cursor, s.log_base);
  batch.next = s.log_base + s.log.size();
  if (from < batch.next)
    batch.events.assign(s.log.begin() + static_cast<std::ptrdiff_t>(from - s.log_base), s.log.end());
  status_locked(batch.status);
  return batch;
}

void StreamSession::release_until(uint64_t cursor) {
  std::lock_guard lock(mutex_);
  State& s = *state_;
  while (s.log_base < cursor && !s.log.empty()) {
    s.log.pop_front();
    ++s.log_base;
  }
}

StreamStatus StreamSession::status() const {
  std::lock_guard lock(mutex_);
  StreamStatus out;
  status_locked(out);
  return out;
}

void StreamSession::status_locked(StreamStatus& out) const {
  const State& s = *state_;
  out.received_seconds = to_seconds(s.received_samples);
  out.processed_seconds = to_seconds(s.processed_samples);
  out.heard_seconds = to_seconds(s.heard_samples);
  out.skipped_seconds = to_seconds(s.skipped_samples);
  out.sender_ahead = s.sender_ahead;
  // A pause the VAD has seen counts as covered: there is nothing in it to transcribe.
  double covered = s.in_speech ? 0.0 : out.processed_seconds;
  out.committed_until = std::max(s.committed_end, covered);
  out.transcribed_until = std::max({s.committed_end, s.provisional_end, covered});
  out.wall_seconds_since_first_audio = s.first_audio_wall < 0 ? 0 : clock_() - s.first_audio_wall;
  // Finished once the log is complete too (a stage may still be posting).
  out.finished = s.finished && s.log_closed;
  out.error = s.error;
  out.version = s.version;
}

bool StreamSession::has_work() const {
  std::lock_guard lock(mutex_);
  const State& s = *state_;
  if (s.finished || !s.error.empty() || s.halted) return false;
  if (s.end_requested || s.pending_gap > 0 || s.finalize_requested) return true;
  const double step = s.end_pending ? options_.end_pending_step_seconds : options_.min_step_seconds;
  return s.pending.size() >= static_cast<size_t>(std::max(1.0, step * kSampleRate));
}

bool StreamSession::live_locked() const {
  return state_->pending.size() <= static_cast<size_t>(options_.urgent_max_waiting_seconds * kSampleRate);
}

bool StreamSession::urgent() const {
  std::lock_guard lock(mutex_);
  return (state_->end_pending && live_locked()) || state_->finalize_requested;
}

bool StreamSession::flush_due() const {
  std::lock_guard lock(mutex_);
  return (state_->flush_due && live_locked()) || state_->finalize_requested;
}

bool StreamSession::done() const {
  std::lock_guard lock(mutex_);
  return (state_->finished && state_->log_closed) || !state_->error.empty();
}

uint64_t StreamSession::version() const {
  std::lock_guard lock(mutex_);
  return state_->version;
}

SessionStats StreamSession::stats() const {
  std::lock_guard lock(mutex_);
  return state_->stats;
}

void StreamSession::step() {
  std::lock_guard step_lock(step_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (state_->halted) return;
    state_->stepping = true;
  }
  try {
    run_step();
  } catch (const std::exception& e) {
    fail(e.what());
  }
  {
    std::lock_guard lock(mutex_);
    state_->stepping = false;
    ++state_->version;
  }
  notify_listener();
}

void StreamSession::run_step() {
  State& s = *state_;
  std::vector<float> chunk;
  int64_t chunk_start = 0;
  int64_t gap = 0;
  bool last = false;
  bool finalize = false;
  uint64_t finalize_answers = 0;        // the requests this step's Finalized answers
  std::vector<events::Event> settings;  // SettingsChanged due before this step's audio
  {
    std::lock_guard lock(mutex_);
    if (s.finished || !s.error.empty()) return;
    gap = s.pending_gap;
    s.pending_gap = 0;
    s.skipped_samples += gap;
    s.consumed_samples += gap;
    while (!s.settings_at.empty() && s.settings_at.front().first <= s.consumed_samples) {
      settings.emplace_back(
          events::SettingsChanged{to_seconds(s.settings_at.front().first), std::move(s.settings_at.front().second)});
      s.settings_at.pop_front();
    }
    size_t take =
        std::min(s.pending.size(), static_cast<size_t>(std::max(1.0, options_.max_step_seconds * kSampleRate)));
    // A finalize flushes at the position it was asked at, and new settings apply
    // there: the step stops at the first.
    if (!s.finalize_at.empty())
      take =
          std::min(take, static_cast<size_t>(std::max<int64_t>(0, s.finalize_at.front().first - s.consumed_samples)));
    if (!s.settings_at.empty())
      take =
          std::min(take, static_cast<size_t>(std::max<int64_t>(0, s.settings_at.front().first - s.consumed_samples)));
    chunk.assign(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(take));
    s.pending.erase(s.pending.begin(), s.pending.begin() + static_cast<std::ptrdiff_t>(take));
    chunk_start = s.consumed_samples;
    s.consumed_samples += static_cast<int64_t>(take);
    last = s.end_requested && s.pending.empty() && s.pending_gap == 0;
    // A finalize is answered by the step that reaches its position (every request at
    // or before it at once).
    while (!s.finalize_at.empty() && s.finalize_at.front().first <= s.consumed_samples) {
      finalize = true;
      finalize_answers = s.finalize_at.front().second;
      s.finalize_at.pop_front();
    }
    s.finalize_requested = !s.finalize_at.empty();
  }
  for (events::Event& e : settings) {
    std::vector<events::Event> out = run_chain(std::move(e));
    std::lock_guard lock(mutex_);
    append_locked(out);
  }
  const double started = clock_();
  if (!chunk.empty() && !stages_.empty()) {
    // The stages hear the stream too (diarization): every sample, before this step's events.
    std::lock_guard chain_lock(chain_mutex_);
    for (const auto& stage : stages_) stage->audio(chunk, to_seconds(chunk_start));
  }
  // Audio waits in `held` until the VAD has decided on it, then goes to the model
  // (speech) or is dropped (pause).
  std::vector<float>& held = s.held;
  auto release_until = [&](int64_t until) {
    const int64_t held_end = s.held_start + static_cast<int64_t>(held.size());
    until = std::clamp(until, s.held_start, held_end);
    const size_t count = static_cast<size_t>(until - s.held_start);
    if (count > 0 && s.in_speech) feed_speech(std::span<const float>(held).first(count), until);
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(count));
    s.held_start = until;
  };
  if (gap > 0) {
    release_until(chunk_start - gap);
    // A pass may have heard the first of the skipped samples before they were dropped.
    const int64_t heard_to = std::clamp(s.vad_heard, chunk_start - gap, chunk_start);
    skip_gap(chunk_start - gap, chunk_start, chunk_start - heard_to);
    s.held_start = chunk_start;
  }
  s.vad_heard = std::max(s.vad_heard, chunk_start);
  const int64_t chunk_end = chunk_start + static_cast<int64_t>(chunk.size());
  held.insert(held.end(), chunk.begin(), chunk.end());
  // The VAD hears what a pass's listener has not heard yet; the step applies the
  // events its audio reaches (in stream samples), later ones wait for their step.
  std::vector<VadEvent> vad_events;
  if (vad_) {
    auto heard = [&](std::vector<VadEvent> events) {
      for (VadEvent& e : events) s.heard_events.push_back({e.kind, e.sample + s.vad_offset});
    };
    if (chunk_end > s.vad_heard) {
      heard(vad_->push(std::span<const float>(chunk).subspan(static_cast<size_t>(s.vad_heard - chunk_start))));
      s.vad_heard = chunk_end;
    }
    if (last) heard(vad_->finish());
    while (!s.heard_events.empty() && (last || s.heard_events.front().sample <= chunk_end)) {
      vad_events.push_back(s.heard_events.front());
      s.heard_events.pop_front();
    }
  }
  for (const VadEvent& event : vad_events) {
    const int64_t at = std::max(event.sample, s.held_start);
    release_until(at);
    if (event.kind == VadEvent::Kind::kSpeechStart && !s.in_speech) {
      end_silence(s.held_start);
    } else if (event.kind == VadEvent::Kind::kSpeechEnd && s.in_speech) {
      begin_silence(s.held_start);
    }
  }
  // A finalize hands the model speech the VAD has not decided on yet: the client
  // wants everything it sent; a pause keeps its undecided audio (it may hold the
  // start of speech).
  const bool release_all = last || !vad_ || (finalize && s.in_speech);
  if (release_all) {
    release_until(chunk_end);
  } else {
    int64_t decided = chunk_end - vad_->max_event_delay_samples();
    if (const std::optional<int64_t> d = vad_->decided_until()) decided = std::max(decided, *d + s.vad_offset);
    release_until(decided);
  }

  // While the VAD has an end pending, the audio released since the last pass ends
  // where the speech would end and the flush is a few windows away: a pass now
  // would only delay that flush (it waits for the pass).
  bool end_pending = vad_ && s.in_speech && !last && end_heard();
  // The flush the decision will ask for can be worked out now, while the VAD
  // waits (a processor that can undo it; the audio it would flush is all here).
  if (end_pending && !finalize && !s.flush_prepared) {
    processor_->prepare_flush();
    s.flush_prepared = true;
  }
  if (s.fed_since_process && !last && !finalize && !end_pending) {
    // The VAD listens while the pass runs: should the speech end meanwhile, the
    // pass stops (where the processor allows) and its audio goes to the flush.
    std::optional<ProcessResult> r;
    s.flush_prepared = false;  // a pass, run or stopped, drops a prepared flush
    try {
      PassListener listen(vad_ && options_.stop_passes ? std::function<bool()>([this] { return listen_during_pass(); })
                                                       : nullptr);
      r = processor_->process(false);
    } catch (const PassStopped&) {
      ++s.stopped_passes;
      end_pending = end_heard();
    }
    if (r) {
      ++s.passes;
      commit(r->committed);
      s.fed_since_process = false;
    }
  }
  if (finalize && !last && s.in_speech) {
    // Last-pass semantics without ending the stream: a flush as at a pause, then
    // speech resumes at once (no silence inserted, context kept).
    ProcessResult r = processor_->start_silence();
    ++s.passes;
    commit(r.committed);
    s.fed_since_process = false;
    s.flushed = true;
    processor_->end_silence(0.0, to_seconds(s.held_start));
  }
  if (last && !s.flushed) {
    ProcessResult r = processor_->finish();
    ++s.passes;
    commit(r.committed);
    s.fed_since_process = false;
  }
  double model_seconds = clock_() - started;
  std::vector<Word> provisional = processor_->provisional();

  // The step's closing events: the tail, a pause still going on, the finalize
  // and the end of the stream, staged before the lock, appended with the status
  // they belong to.
  std::vector<events::Event> out;
  auto emit = [&](events::Event e) {
    std::vector<events::Event> staged = run_chain(std::move(e));
    out.insert(out.end(), std::make_move_iterator(staged.begin()), std::make_move_iterator(staged.end()));
  };
  note_language(out);
  if (!same_words(provisional, s.provisional)) {
    s.provisional = provisional;
    emit(events::ProvisionalChanged{provisional});
  }
  {
    std::vector<events::Event> advanced = run_advance(to_seconds(chunk_end));
    out.insert(out.end(), std::make_move_iterator(advanced.begin()), std::make_move_iterator(advanced.end()));
  }
  // A pause that has lasted long enough is emitted while it goes on (a live
  // silence line), again whenever its decided end moves.
  const int64_t threshold = static_cast<int64_t>(options_.pause_segmentation_seconds * kSampleRate);
  const int64_t silence_end = s.held_start;
  const bool long_pause = !s.in_speech && silence_end - s.silence_start >= threshold;
  if (long_pause && (to_seconds(silence_end) != s.pause_emitted_end || last)) {
    s.pause_emitted_end = to_seconds(silence_end);
    emit(events::Pause{to_seconds(s.silence_start), to_seconds(silence_end), !last});
  }
  if (finalize) emit(events::Finalized{to_seconds(s.held_start), finalize_answers});
  if (last) emit(events::EndOfStream{});

  std::lock_guard lock(mutex_);
  s.stats.passes = s.passes;
  s.stats.stopped_passes = s.stopped_passes;
  s.stats.model_seconds += model_seconds;
  s.stats.audio_seconds += to_seconds(chunk_end - chunk_start);
  s.processed_samples = s.held_start;
  s.heard_samples = chunk_end;
  s.end_pending = end_pending;
  s.flush_due = end_pending && !s.flush_prepared;
  s.provisional_end = 0;
  for (const Word& w : provisional) s.provisional_end = std::max(s.provisional_end, w.end);
  append_locked(out);
  if (last) s.finished = true;
  ++s.version;
}

void StreamSession::feed_speech(std::span<const float> samples, int64_t end_sample) {
  processor_->insert_audio(samples, to_seconds(end_sample));
  state_->fed_since_process = true;
  state_->flush_prepared = false;
  state_->flushed = false;
}

void StreamSession::note_language(std::vector<events::Event>& out) {
  std::string language = processor_->language();
  if (language.empty() || language == state_->language) return;
  state_->language = language;
  std::vector<events::Event> staged = run_chain(events::LanguageDetected{std::move(language)});
  out.insert(out.end(), std::make_move_iterator(staged.begin()), std::make_move_iterator(staged.end()));
}

void StreamSession::commit(const std::vector<Word>& words) {
  if (words.empty()) return;
  std::string language = processor_->language();
  std::vector<events::Event> out;
  note_language(out);
  std::vector<Word> filled = words;
  for (Word& w : filled)
    if (w.language.empty()) w.language = language;
  std::vector<events::Event> staged = run_chain(events::WordsCommitted{std::move(filled)});
  out.insert(out.end(), std::make_move_iterator(staged.begin()), std::make_move_iterator(staged.end()));
  std::lock_guard lock(mutex_);
  State& s = *state_;
  for (const Word& w : words) s.committed_end = std::max(s.committed_end, w.end);
  append_locked(out);
}

void StreamSession::begin_silence(int64_t at_sample) {
  // start_silence() flushes whatever was fed since the last pass.
  ProcessResult r = processor_->start_silence();
  ++state_->passes;
  state_->fed_since_process = false;
  state_->flushed = true;
  commit(r.committed);
  // The tail after the flush comes before the speech end: a stage that waits for every
  // word to be committed (turns) sees the pause as it is, even when the same step goes
  // on into the next speech.
  std::vector<events::Event> out;
  std::vector<Word> provisional = processor_->provisional();
  if (!same_words(provisional, state_->provisional)) {
    state_->provisional = provisional;
    out = run_chain(events::ProvisionalChanged{std::move(provisional)});
  }
  std::vector<events::Event> ended = run_chain(events::SpeechEnded{to_seconds(at_sample)});
  out.insert(out.end(), std::make_move_iterator(ended.begin()), std::make_move_iterator(ended.end()));
  std::lock_guard lock(mutex_);
  state_->in_speech = false;
  state_->silence_start = at_sample;
  state_->pause_emitted_end = -1;
  append_locked(out);
}

void StreamSession::end_silence(int64_t at_sample, bool heard) {
  State& s = *state_;
  const double duration = to_seconds(at_sample - s.silence_start);
  processor_->end_silence(duration, to_seconds(at_sample));
  std::vector<events::Event> out;
  if (heard && duration >= options_.pause_segmentation_seconds)
    out = run_chain(events::Pause{to_seconds(s.silence_start), to_seconds(at_sample), false});
  std::vector<events::Event> started = run_chain(events::SpeechStarted{to_seconds(at_sample)});
  out.insert(out.end(), std::make_move_iterator(started.begin()), std::make_move_iterator(started.end()));
  std::lock_guard lock(mutex_);
  s.in_speech = true;
  s.pause_emitted_end = -1;
  append_locked(out);
}

bool StreamSession::end_heard() const {
  const State& s = *state_;
  if (vad_->end_pending()) return true;
  return std::any_of(s.heard_events.begin(), s.heard_events.end(),
                     [](const VadEvent& e) { return e.kind == VadEvent::Kind::kSpeechEnd; });
}

void StreamSession::hear_pending() {
  State& s = *state_;
  std::vector<float> fresh;
  {
    std::lock_guard lock(mutex_);
    // pending[0] is this stream sample; a gap before it went unheard (the step sorts that out).
    const int64_t pending_start = s.consumed_samples + s.pending_gap;
    const int64_t from = s.vad_heard - pending_start;
    if (from >= 0 && s.pending.size() >= static_cast<size_t>(from) + kListenSamples)
      fresh.assign(s.pending.begin() + from, s.pending.end());
  }
  if (fresh.empty()) return;
  for (const VadEvent& e : vad_->push(fresh)) s.heard_events.push_back({e.kind, e.sample + s.vad_offset});
  s.vad_heard += static_cast<int64_t>(fresh.size());
}

bool StreamSession::listen_during_pass() {
  hear_pending();
  return state_->in_speech && end_heard();
}

bool StreamSession::listen_waiting() {
  // Hearing ahead makes a step's choices (a pass or none) depend on timing.
  if (!vad_ || !options_.stop_passes) return false;
  std::unique_lock step_lock(step_mutex_, std::try_to_lock);
  if (!step_lock.owns_lock()) return false;  // stepping: its own pass listens
  State& s = *state_;
  {
    std::lock_guard lock(mutex_);
    if (s.halted || s.finished || s.end_requested || !s.error.empty() || s.end_pending) return false;
  }
  hear_pending();
  if (!s.in_speech || !end_heard()) return false;
  std::lock_guard lock(mutex_);
  s.end_pending = true;
  s.flush_due = !s.flush_prepared;
  ++s.version;
  return true;
}

void StreamSession::skip_gap(int64_t from_sample, int64_t to_sample, int64_t vad_skip) {
  State& s = *state_;
  // The VAD never hears skipped audio: its sample 0 moves by what it missed.
  s.vad_offset += vad_skip;
  auto announce = [&] {
    std::vector<events::Event> out = run_chain(events::AudioSkipped{to_seconds(from_sample), to_seconds(to_sample)});
    std::lock_guard lock(mutex_);
    append_locked(out);
  };
  if (!s.in_speech) return announce();  // a pause simply gets longer
  // A gap inside speech is a pause: the model flushes before it and resumes after.
  begin_silence(from_sample);
  announce();
  end_silence(to_sample, false);  // skipped, not a pause: no Pause for it
}

}  // namespace earshot::session

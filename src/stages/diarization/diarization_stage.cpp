#include "stages/diarization/diarization_stage.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::stages::diarization {

namespace {

struct Chunk {
  std::vector<float> samples;
  double start = 0;  // stream time of samples[0]
};

struct PendingWord {
  uint64_t index = 0;  // among the stream's committed words
  double start = 0, end = 0;
};

// Where the source's clock meets the stream's: the source hears the stream's
// audio without the parts dropped (or skipped by the session), so its time runs
// behind the stream's by the gaps before it.
struct Breakpoint {
  double source = 0;
  double stream = 0;
};

}  // namespace

struct DiarizationStage::Shared {
  DiarizationOptions options;
  WorkerPool* pool = nullptr;  // owned by the stage, which outlives its jobs
  std::shared_ptr<DiarizationCounters> counters;

  // The source side: touched by one job at a time (live) or the session's thread (files).
  std::unique_ptr<ActivitySource> source;
  double source_seconds = 0;     // audio pushed so far, on the source's clock
  double source_frames_end = 0;  // the frames' end so far, on the source's clock
  double source_compute = 0;     // wall seconds inside the source
  double expected_start = -1;
  std::vector<Breakpoint> breaks;

  std::mutex mutex;  // everything below
  std::condition_variable idle;
  Post post;
  bool closed = false;
  bool scheduled = false;  // a job is queued or running (live)
  std::deque<Chunk> queue;
  int64_t queued_samples = 0;
  bool finish_requested = false;
  bool end_held = false;  // EndOfStream waits for the last speakers (live)
  bool finished = false;  // the source has finished: every frame is in
  bool failed = false;
  std::deque<ActivityFrame> frames;  // stream clock, in order
  double covered_until = 0;          // stream time the frames have reached
  std::deque<PendingWord> pending;   // committed words awaiting their speaker
  uint64_t next_word = 0;
  int64_t received_samples = 0, dropped_samples = 0;  // this stream's (progress())
  double diarized_seconds = 0, compute_seconds = 0;   // copied from the source side after each step

  ~Shared() { counters->queued_samples -= queued_samples; }

  // Pushes a chunk through the source and returns its new frames on the stream clock.
  std::vector<ActivityFrame> feed(const Chunk& chunk) {
    const auto t0 = std::chrono::steady_clock::now();
    const double seconds = static_cast<double>(chunk.samples.size()) / kSampleRate;
    if (expected_start < 0 || std::abs(chunk.start - expected_start) > 1e-6)
      breaks.push_back({source_seconds, chunk.start});
    source->push(chunk.samples);
    source_seconds += seconds;
    expected_start = chunk.start + seconds;
    std::vector<ActivityFrame> frames = take();
    counters->processed_samples += static_cast<int64_t>(chunk.samples.size());
    count_compute(t0);
    return frames;
  }

  std::vector<ActivityFrame> finish_source() {
    const auto t0 = std::chrono::steady_clock::now();
    source->finish();
    std::vector<ActivityFrame> frames = take();
    source_frames_end = source_seconds;  // every pushed sample is in a frame now
    count_compute(t0);
    return frames;
  }

  void count_compute(std::chrono::steady_clock::time_point since) {
    const auto elapsed = std::chrono::steady_clock::now() - since;
    counters->compute_microseconds += std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
    source_compute += std::chrono::duration<double>(elapsed).count();
  }

  std::vector<ActivityFrame> take() {
    std::vector<ActivityFrame> out = source->take_frames();
    for (ActivityFrame& f : out) {
      source_frames_end = std::max(source_frames_end, f.end);
      Breakpoint b{0, 0};
      for (const Breakpoint& x : breaks)
        if (x.source <= f.start + 1e-9) b = x;
      f.start = b.stream + (f.start - b.source);
      f.end = b.stream + (f.end - b.source);
    }
    return out;
  }

  // With the lock held, on the source's side after a step: its new frames in,
  // its progress copied (then the speakers now decided: assign_ready()).
  void add_frames(std::vector<ActivityFrame> fresh) {
    for (ActivityFrame& f : fresh) {
      covered_until = std::max(covered_until, f.end);
      frames.push_back(std::move(f));
    }
    diarized_seconds = std::min(source_frames_end, source_seconds);
    compute_seconds = source_compute;
  }

  std::vector<events::Event> assign_ready() {
    std::vector<events::Event> out;
    events::SpeakersAssigned assigned;
    const double margin = options.rule.nearest_seconds;
    while (!pending.empty() && (finished || covered_until >= pending.front().end + margin)) {
      const PendingWord& w = pending.front();
      if (assigned.speakers.empty()) assigned.first_word = w.index;
      const int speaker = speaker_of(w.start, w.end, frames, options.rule);
      assigned.speakers.push_back(speaker);
      ++counters->words;
      if (speaker < 0) ++counters->unknown_words;
      pending.pop_front();
    }
    if (!assigned.speakers.empty()) out.push_back(std::move(assigned));
    // Frames before what is left to assign (and some for provisional words) are done with.
    const double keep_from =
        std::min(pending.empty() ? covered_until : pending.front().start, covered_until - 30.0) - margin;
    while (!frames.empty() && frames.front().end < keep_from) frames.pop_front();
    return out;
  }
};

DiarizationStage::DiarizationStage(std::unique_ptr<ActivitySource> source, DiarizationOptions options,
                                   std::shared_ptr<WorkerPool> pool, std::shared_ptr<DiarizationCounters> counters)
    : pool_(std::move(pool)), shared_(std::make_shared<Shared>()) {
  if (!source) throw Error(ErrorCode::kInternal, "DiarizationStage needs an activity source");
  shared_->options = options;
  shared_->pool = pool_.get();
  shared_->counters = counters ? std::move(counters) : std::make_shared<DiarizationCounters>();
  shared_->source = std::move(source);
}

DiarizationStage::~DiarizationStage() {
  std::unique_lock lock(shared_->mutex);
  shared_->closed = true;
  shared_->idle.wait(lock, [&] { return !shared_->scheduled; });
}

void DiarizationStage::attach(Post post) {
  std::lock_guard lock(shared_->mutex);
  shared_->post = std::move(post);
}

void DiarizationStage::audio(std::span<const float> samples, double start) {
  if (samples.empty()) return;
  Shared& s = *shared_;
  Chunk chunk{std::vector<float>(samples.begin(), samples.end()), start};
  const auto n = static_cast<int64_t>(chunk.samples.size());
  if (!s.pool) {
    // A file: in order, now; the speakers it decides go out with the next event.
    std::vector<ActivityFrame> frames = s.feed(chunk);
    std::lock_guard lock(s.mutex);
    s.received_samples += n;
    s.add_frames(std::move(frames));
    return;
  }
  bool schedule = false;
  {
    std::lock_guard lock(s.mutex);
    if (s.closed || s.failed || s.finish_requested) return;
    s.received_samples += n;
    s.queue.push_back(std::move(chunk));
    s.queued_samples += n;
    s.counters->queued_samples += n;
    // Bounded: the oldest waiting audio goes when the source is this far behind.
    const auto limit = static_cast<int64_t>(s.options.max_queue_seconds * kSampleRate);
    while (s.queue.size() > 1 && s.queued_samples > limit) {
      const auto dropped = static_cast<int64_t>(s.queue.front().samples.size());
      s.queue.pop_front();
      s.queued_samples -= dropped;
      s.counters->queued_samples -= dropped;
      s.counters->dropped_samples += dropped;
      s.dropped_samples += dropped;
    }
    schedule = !s.scheduled;
    s.scheduled = true;
  }
  if (schedule) s.pool->submit([shared = shared_] { run_jobs(shared); });
}

void DiarizationStage::run_jobs(const std::shared_ptr<Shared>& shared) {
  Shared& s = *shared;
  for (;;) {
    Chunk chunk;
    bool finish = false;
    {
      std::lock_guard lock(s.mutex);
      if (s.closed || s.failed || (s.queue.empty() && !(s.finish_requested && !s.finished))) {
        s.scheduled = false;
        s.idle.notify_all();
        return;
      }
      if (!s.queue.empty()) {
        chunk = std::move(s.queue.front());
        s.queue.pop_front();
        const auto n = static_cast<int64_t>(chunk.samples.size());
        s.queued_samples -= n;
        s.counters->queued_samples -= n;
      } else {
        finish = true;
      }
    }
    std::vector<ActivityFrame> frames = finish ? s.finish_source() : s.feed(chunk);
    std::vector<events::Event> out;
    Post post;
    {
      std::lock_guard lock(s.mutex);
      s.add_frames(std::move(frames));
      if (finish) s.finished = true;
      out = s.assign_ready();
      if (finish && s.end_held) {
        out.push_back(events::EndOfStream{});
        s.end_held = false;
      }
      if (!s.closed) post = s.post;
    }
    // Still `scheduled`: the stage's destructor waits for this post to return.
    if (!out.empty() && post) post(std::move(out));
  }
}

void DiarizationStage::consume(const events::Event& event, const std::function<void(events::Event)>& emit) {
  Shared& s = *shared_;
  std::vector<events::Event> out;
  bool schedule = false;
  {
    std::unique_lock lock(s.mutex);
    if (const auto* committed = std::get_if<events::WordsCommitted>(&event)) {
      events::WordsCommitted words = *committed;
      if (!s.failed && !words.words.empty()) {
        words.speakers_pending = true;
        for (const Word& w : words.words) s.pending.push_back({s.next_word++, w.start, w.end});
      } else {
        s.next_word += words.words.size();
      }
      out.push_back(std::move(words));
    } else if (const auto* tail = std::get_if<events::ProvisionalChanged>(&event)) {
      // Provisional words: the speaker the frames so far suggest (revised with every tail).
      events::ProvisionalChanged guessed = *tail;
      for (Word& w : guessed.words) w.speaker = speaker_of(w.start, w.end, s.frames, s.options.rule);
      out.push_back(std::move(guessed));
    } else if (std::holds_alternative<events::StreamError>(event)) {
      s.failed = true;  // nothing more will be assigned; the protocols release held words
      s.pending.clear();
      out.push_back(event);
    } else if (std::holds_alternative<events::EndOfStream>(event) && !s.failed) {
      if (!s.pool) {
        lock.unlock();
        std::vector<ActivityFrame> frames = s.finish_source();
        lock.lock();
        s.add_frames(std::move(frames));
        s.finished = true;
        out = s.assign_ready();
        out.push_back(event);
      } else {
        // The last speakers come from the pool's job, then EndOfStream.
        s.finish_requested = true;
        s.end_held = true;
        schedule = !s.scheduled;
        s.scheduled = true;
      }
    } else {
      out.push_back(event);
    }
    // Speakers decided since (a file's audio() decides them between events).
    if (!s.failed && !std::holds_alternative<events::EndOfStream>(event)) {
      std::vector<events::Event> assigned = s.assign_ready();
      out.insert(out.end(), assigned.begin(), assigned.end());
    }
  }
  if (schedule) s.pool->submit([shared = shared_] { run_jobs(shared); });
  for (events::Event& e : out) emit(std::move(e));
}

DiarizationProgress DiarizationStage::progress() const {
  const Shared& s = *shared_;
  std::lock_guard lock(shared_->mutex);
  const auto seconds = [](int64_t samples) { return static_cast<double>(samples) / kSampleRate; };
  return {seconds(s.received_samples), seconds(s.dropped_samples), s.diarized_seconds, s.compute_seconds};
}

double DiarizationProgress::lag_seconds() const {
  return std::max(0.0, received_seconds - dropped_seconds - diarized_seconds);
}

}  // namespace earshot::stages::diarization

#include "bench/capacity.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/error.h"
#include "features/mel.h"
#include "protocol/wlk/projection.h"
#include "session/scheduler.h"
#include "stages/diarization/diarization_stage.h"

namespace earshot::bench {
namespace {

// The clock a run or a timer uses when it was given none.
Clock& or_steady(Clock* clock) {
  static SteadyClock steady;  // stateless: shared by every thread
  return clock ? *clock : steady;
}

// Adds the time of its scope on `clock` to `sink`.
class ScopeTimer {
 public:
  ScopeTimer(double& sink, Clock& clock) : sink_(sink), clock_(clock), start_(clock.now()) {}
  ~ScopeTimer() { sink_ += clock_.now() - start_; }
  ScopeTimer(const ScopeTimer&) = delete;
  ScopeTimer& operator=(const ScopeTimer&) = delete;

 private:
  double& sink_;
  Clock& clock_;
  double start_;
};

class MelProbe : public AsrDecoder {
 public:
  MelProbe(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ProfileCounters> counters, Clock& clock)
      : inner_(std::move(inner)),
        counters_(std::move(counters)),
        clock_(clock),
        filters_(features::mel_filter_bank(kMels)) {}
  const AsrText& text() const override { return inner_->text(); }
  int n_text_ctx() const override { return inner_->n_text_ctx(); }
  int n_alignment_heads() const override { return inner_->n_alignment_heads(); }
  double frames_per_second() const override { return inner_->frames_per_second(); }
  int max_samples() const override { return inner_->max_samples(); }
  int encode(std::span<const float> pcm) override {
    {
      ScopeTimer t(counters_->mel_probe, clock_);
      const features::Mel mel = features::log_mel_spectrogram(pcm, filters_, kMels);
      sink_ += mel.data.empty() ? 0.0f : mel.data.front();  // kept, so the work is not optimised away
    }
    return inner_->encode(pcm);
  }
  void reset(int n) override { inner_->reset(n); }
  int n_past() const override { return inner_->n_past(); }
  void rollback(int n) override { inner_->rollback(n); }
  void reorder(std::span<const int> source) override { inner_->reorder(source); }
  DecodeResult decode(const DecodeRequest& request) override { return inner_->decode(request); }
  std::vector<float> detect_language() override { return inner_->detect_language(); }

 private:
  static constexpr int kMels = 80;
  std::unique_ptr<AsrDecoder> inner_;
  std::shared_ptr<ProfileCounters> counters_;
  Clock& clock_;
  std::vector<float> filters_;
  float sink_ = 0;
};

class TimedProcessor : public OnlineProcessor {
 public:
  TimedProcessor(std::unique_ptr<OnlineProcessor> inner, std::shared_ptr<ProfileCounters> counters, Clock& clock)
      : inner_(std::move(inner)), c_(std::move(counters)), clock_(clock) {}
  void insert_audio(std::span<const float> samples, double end) override {
    ScopeTimer t(c_->processor, clock_);
    inner_->insert_audio(samples, end);
  }
  ProcessResult process(bool is_last) override {
    ScopeTimer t(c_->processor, clock_);
    return inner_->process(is_last);
  }
  std::vector<Word> provisional() const override { return inner_->provisional(); }
  std::vector<Word> hypothesis() const override { return inner_->hypothesis(); }
  ProcessResult start_silence() override {
    ScopeTimer t(c_->processor, clock_);
    return inner_->start_silence();
  }
  void end_silence(double duration, double offset) override {
    ScopeTimer t(c_->processor, clock_);
    inner_->end_silence(duration, offset);
  }
  ProcessResult finish() override {
    ScopeTimer t(c_->processor, clock_);
    return inner_->finish();
  }
  void prepare_flush() override {
    ScopeTimer t(c_->processor, clock_);
    inner_->prepare_flush();
  }
  void warmup() override { inner_->warmup(); }  // not part of the stream
  std::string language() const override { return inner_->language(); }

 private:
  std::unique_ptr<OnlineProcessor> inner_;
  std::shared_ptr<ProfileCounters> c_;
  Clock& clock_;
};

class TimedVad : public session::VoiceActivityDetector {
 public:
  TimedVad(std::unique_ptr<session::VoiceActivityDetector> inner, std::shared_ptr<ProfileCounters> counters,
           Clock& clock)
      : inner_(std::move(inner)), c_(std::move(counters)), clock_(clock) {}
  std::vector<session::VadEvent> push(std::span<const float> samples) override {
    ScopeTimer t(c_->vad, clock_);
    return inner_->push(samples);
  }
  std::vector<session::VadEvent> finish() override {
    ScopeTimer t(c_->vad, clock_);
    return inner_->finish();
  }
  int64_t max_event_delay_samples() const override { return inner_->max_event_delay_samples(); }
  bool end_pending() const override { return inner_->end_pending(); }
  std::optional<int64_t> decided_until() const override { return inner_->decided_until(); }

 private:
  std::unique_ptr<session::VoiceActivityDetector> inner_;
  std::shared_ptr<ProfileCounters> c_;
  Clock& clock_;
};

// Each committed word's speaker delay: the time from its WordsCommitted
// (speakers pending) to the SpeakersAssigned naming its speaker, both seen at
// the chain's end, on the run's clock.
struct SpeakerDelays {
  std::mutex mutex;
  std::map<uint64_t, double> committed_at;  // word index -> its commit, until its speaker comes
  uint64_t next_word = 0;                   // words are numbered as the diarization stage numbers them
  long pending_words = 0;                   // committed with speakers_pending
  std::vector<double> delays;
};

class SpeakerDelayProbe : public stages::Stage {
 public:
  SpeakerDelayProbe(std::shared_ptr<SpeakerDelays> log, Clock& clock) : log_(std::move(log)), clock_(clock) {}
  void consume(const events::Event& event, const std::function<void(events::Event)>& emit) override {
    if (const auto* committed = std::get_if<events::WordsCommitted>(&event)) {
      const double now = clock_.now();
      std::lock_guard lock(log_->mutex);
      if (committed->speakers_pending) {
        for (size_t i = 0; i < committed->words.size(); ++i) log_->committed_at[log_->next_word + i] = now;
        log_->pending_words += static_cast<long>(committed->words.size());
      }
      log_->next_word += committed->words.size();
    } else if (const auto* assigned = std::get_if<events::SpeakersAssigned>(&event)) {
      const double now = clock_.now();
      std::lock_guard lock(log_->mutex);
      for (size_t i = 0; i < assigned->speakers.size(); ++i) {
        const auto it = log_->committed_at.find(assigned->first_word + i);
        if (it == log_->committed_at.end()) continue;
        log_->delays.push_back(std::max(0.0, now - it->second));
        log_->committed_at.erase(it);
      }
    }
    emit(event);
  }

 private:
  std::shared_ptr<SpeakerDelays> log_;
  Clock& clock_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace

StageTimes& StageTimes::operator+=(const StageTimes& o) {
  mel += o.mel;
  vad += o.vad;
  encoder += o.encoder;
  decoder += o.decoder;
  policy += o.policy;
  protocol += o.protocol;
  encoder_passes += o.encoder_passes;
  decoder_calls += o.decoder_calls;
  return *this;
}

StageTimes ProfileCounters::to_stage_times() const {
  StageTimes t;
  // The probe's recomputation stands for the encoder's own mel, which is inside
  // the encoder pass: take it out of the encoder and out of the processor time.
  t.mel = mel_probe;
  t.encoder = std::max(0.0, passes_encoder - mel_probe);
  t.decoder = passes_decoder;
  t.policy = std::max(0.0, processor - passes_encoder - passes_decoder - mel_probe);
  t.vad = vad;
  t.protocol = protocol;
  t.encoder_passes = encoder_passes;
  t.decoder_calls = decoder_calls;
  return t;
}

PassReport profile_passes(std::shared_ptr<ProfileCounters> counters) {
  return [c = std::move(counters)](ModelPass pass, std::chrono::nanoseconds elapsed) {
    const double s = std::chrono::duration<double>(elapsed).count();
    if (pass == ModelPass::kEncoder) {
      c->passes_encoder += s;
      c->encoder_passes++;
    } else {
      c->passes_decoder += s;
      c->decoder_calls++;
    }
  };
}

std::unique_ptr<AsrDecoder> probe_mel(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ProfileCounters> counters,
                                      Clock* clock) {
  return std::make_unique<MelProbe>(std::move(inner), std::move(counters), or_steady(clock));
}

std::unique_ptr<OnlineProcessor> time_processor(std::unique_ptr<OnlineProcessor> inner,
                                                std::shared_ptr<ProfileCounters> counters, Clock* clock) {
  return std::make_unique<TimedProcessor>(std::move(inner), std::move(counters), or_steady(clock));
}

session::VadFactory time_vad(session::VadFactory inner, std::shared_ptr<ProfileCounters> counters, Clock* clock) {
  return [inner = std::move(inner), counters = std::move(counters),
          &timer = or_steady(clock)]() -> std::unique_ptr<session::VoiceActivityDetector> {
    return std::make_unique<TimedVad>(inner(), counters, timer);
  };
}

double resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  return 0;
}

namespace {
// The largest of one figure over the sessions (0 without sessions).
double max_over(const std::vector<SessionFigures>& sessions, double SessionFigures::*figure) {
  double m = 0;
  for (const SessionFigures& s : sessions) m = std::max(m, s.*figure);
  return m;
}
}  // namespace

double CapacityRun::max_p95_lag() const { return max_over(per_session, &SessionFigures::p95_lag); }
double CapacityRun::max_lag() const { return max_over(per_session, &SessionFigures::max_lag); }
double CapacityRun::max_drain_seconds() const { return max_over(per_session, &SessionFigures::drain_seconds); }
double CapacityRun::skipped_seconds() const {
  double sum = 0;
  for (const SessionFigures& s : per_session) sum += s.skipped_seconds;
  return sum;
}
double CapacityRun::fairness() const {
  double lo = INFINITY, hi = 0;
  for (const SessionFigures& s : per_session) {
    lo = std::min(lo, s.processed_at_feed_end);
    hi = std::max(hi, s.processed_at_feed_end);
  }
  return per_session.empty() ? 1.0 : (lo > 0 ? hi / lo : INFINITY);
}
double CapacityRun::memory_per_session_bytes() const {
  return sessions > 0 ? std::max(0.0, rss_peak_bytes - rss_before_bytes) / sessions : 0;
}
bool CapacityRun::diarized() const {
  for (const SessionFigures& s : per_session)
    if (s.diarization) return true;
  return false;
}

namespace {
// The largest of one diarization figure over the sessions that have one.
double max_diarization(const std::vector<SessionFigures>& sessions, double DiarizationFigures::*figure) {
  double m = 0;
  for (const SessionFigures& s : sessions)
    if (s.diarization) m = std::max(m, (*s.diarization).*figure);
  return m;
}
}  // namespace

double CapacityRun::max_diarization_p95_lag() const {
  return max_diarization(per_session, &DiarizationFigures::p95_lag);
}
double CapacityRun::max_diarization_lag() const { return max_diarization(per_session, &DiarizationFigures::max_lag); }
double CapacityRun::diarization_dropped_seconds() const {
  double sum = 0;
  for (const SessionFigures& s : per_session)
    if (s.diarization) sum += s.diarization->dropped_seconds;
  return sum;
}
std::optional<double> DiarizationFigures::speaker_delay(double p) const {
  if (speaker_delays.empty()) return std::nullopt;
  return percentile(speaker_delays, p);
}

std::optional<double> CapacityRun::speaker_delay(double p) const {
  std::vector<double> all;
  for (const SessionFigures& s : per_session)
    if (s.diarization)
      all.insert(all.end(), s.diarization->speaker_delays.begin(), s.diarization->speaker_delays.end());
  if (all.empty()) return std::nullopt;
  return percentile(std::move(all), p);
}
long CapacityRun::speaker_delay_words() const {
  long n = 0;
  for (const SessionFigures& s : per_session)
    if (s.diarization) n += static_cast<long>(s.diarization->speaker_delays.size());
  return n;
}
double CapacityRun::diarization_compute_per_audio_second() const {
  double compute = 0, audio = 0;
  for (const SessionFigures& s : per_session) {
    if (!s.diarization) continue;
    compute += s.diarization->compute_seconds;
    audio += s.diarization->received_seconds;
  }
  return audio > 0 ? compute / audio : 0;
}

bool CapacityRun::within(double lag_limit, double diarization_lag_limit) const {
  for (const SessionFigures& s : per_session) {
    if (!s.error.empty() || s.skipped_seconds > 0 || !(s.p95_lag < lag_limit)) return false;
    if (s.diarization && (s.diarization->dropped_seconds > 0 || !(s.diarization->p95_lag < diarization_lag_limit)))
      return false;
  }
  return !per_session.empty();
}

CapacityRun run_capacity(const CapacityFactory& factory, const std::vector<std::vector<float>>& audio,
                         const CapacityOptions& options, Clock* clock_in) {
  if (audio.empty()) throw Error(ErrorCode::kInvalidArgument, "capacity run without sessions");
  if (options.workers < 1) throw Error(ErrorCode::kInvalidArgument, "--workers must be >= 1");
  CapacityRun run;
  run.sessions = static_cast<int>(audio.size());
  Clock& time = or_steady(clock_in);
  run.rss_before_bytes = resident_bytes();
  const auto n = audio.size();

  struct Live {
    std::shared_ptr<session::StreamSession> session;
    std::shared_ptr<ProfileCounters> counters;
    protocol::wlk::Projection projection;
    uint64_t version = 0;
    size_t fed = 0;
    bool ended = false;
    double ended_at = 0;
    double finished_at = -1;
    std::vector<double> lags;
    // The chain's diarization stage (owned by the session) and what it is sampled into; null without.
    const stages::diarization::DiarizationStage* diarization = nullptr;
    std::vector<double> diarization_lags;
    std::shared_ptr<SpeakerDelays> speaker_delays;
  };
  std::vector<Live> live(n);
  // Seconds since the feed started (before it, since the sessions were made).
  std::atomic<double> origin = time.now();
  const auto clock = [&origin, &time] { return time.now() - origin.load(); };
  for (size_t s = 0; s < n; ++s) {
    CapacityStream stream = factory(static_cast<int>(s));
    stream.processor->warmup();  // before the clock starts, as a server warms its model once
    if (stream.counters) *stream.counters = ProfileCounters{};  // the warm-up's passes are no part of the stream
    live[s].counters = stream.counters;
    std::unique_ptr<session::VoiceActivityDetector> vad;
    if (options.vad) vad = options.vad(stream.counters)();
    for (const auto& stage : stream.stages)
      if (const auto* d = dynamic_cast<const stages::diarization::DiarizationStage*>(stage.get()))
        live[s].diarization = d;
    if (live[s].diarization) {
      live[s].speaker_delays = std::make_shared<SpeakerDelays>();
      stream.stages.push_back(std::make_unique<SpeakerDelayProbe>(live[s].speaker_delays, time));
    }
    live[s].session = std::make_shared<session::StreamSession>(std::move(stream.processor), std::move(vad),
                                                               options.stream, clock, std::move(stream.stages));
    run.audio_seconds += static_cast<double>(audio[s].size()) / kSampleRate;
  }
  run.rss_peak_bytes = resident_bytes();

  const auto chunk = static_cast<size_t>(std::lround(options.chunk_seconds * kSampleRate));
  const double tick = 0.1;
  double longest = 0;
  for (const auto& a : audio) longest = std::max(longest, static_cast<double>(a.size()) / kSampleRate);
  // Past the feed, an overloaded run drains its backlog; give up after this.
  const double give_up = longest * 3 + 120;
  {
    std::optional<session::Scheduler> own;
    if (!options.scheduler) own.emplace(options.workers, options.pass_threads);
    session::Scheduler& scheduler = options.scheduler ? *options.scheduler : *own;
    run.workers = scheduler.workers();
    origin = time.now();
    for (int k = 1;; ++k) {
      time.sleep_until(origin.load() + k * tick);
      const double now = clock();
      bool all_done = true;
      for (size_t s = 0; s < n; ++s) {
        Live& l = live[s];
        const std::vector<float>& a = audio[s];
        // Every whole chunk due by now arrives (a client sends chunk by chunk).
        const auto due = std::min(a.size(), static_cast<size_t>(now * kSampleRate) / chunk * chunk);
        if (due > l.fed || (due == a.size() && !l.ended)) {
          if (due > l.fed) l.session->push_audio(std::span<const float>(a).subspan(l.fed, due - l.fed));
          l.fed = due;
          if (due == a.size() && !l.ended) {
            l.session->end_of_stream();
            l.ended = true;
            l.ended_at = now;
          }
          scheduler.notify(l.session);
        }
        const session::StreamStatus st = l.session->status();
        if (!st.finished && st.error.empty()) {
          l.lags.push_back(std::max(0.0, st.received_seconds - st.processed_seconds));
          if (l.diarization) l.diarization_lags.push_back(l.diarization->progress().lag_seconds());
          all_done = false;
        } else if (l.finished_at < 0) {
          l.finished_at = now;
        }
        if (st.version != l.version) {
          l.version = st.version;
          double unused = 0;
          ScopeTimer t(l.counters ? l.counters->protocol : unused, time);
          const std::string update = protocol::wlk::full_update(l.projection.pull(*l.session)).dump();
          (void)update;
        }
      }
      if (k * tick >= longest && run.per_session.empty()) {
        run.per_session.resize(n);
        for (size_t s = 0; s < n; ++s)
          run.per_session[s].processed_at_feed_end = live[s].session->status().processed_seconds;
      }
      run.rss_peak_bytes = std::max(run.rss_peak_bytes, resident_bytes());
      if (all_done && k * tick >= longest) break;
      if (now > give_up) break;
    }
    run.elapsed_seconds = clock();
    run.rss_peak_bytes = std::max(run.rss_peak_bytes, resident_bytes());
  }  // the run's own scheduler finishes the steps in progress
  if (run.per_session.empty()) run.per_session.resize(n);
  StageTimes total;
  bool profiled = false;
  for (size_t s = 0; s < n; ++s) {
    SessionFigures& f = run.per_session[s];
    const session::StreamStatus st = live[s].session->status();
    f.audio_seconds = static_cast<double>(audio[s].size()) / kSampleRate;
    f.p95_lag = percentile(live[s].lags, 0.95);
    f.max_lag = live[s].lags.empty() ? 0 : *std::max_element(live[s].lags.begin(), live[s].lags.end());
    f.skipped_seconds = st.skipped_seconds;
    f.drain_seconds = live[s].finished_at < 0 ? 0 : std::max(0.0, live[s].finished_at - live[s].ended_at);
    f.error = st.error;
    if (!st.finished && f.error.empty()) f.error = "not finished " + std::to_string(give_up) + " s after the start";
    if (const Live& l = live[s]; l.diarization) {
      const stages::diarization::DiarizationProgress p = l.diarization->progress();
      DiarizationFigures d;
      d.p95_lag = percentile(l.diarization_lags, 0.95);
      d.max_lag =
          l.diarization_lags.empty() ? 0 : *std::max_element(l.diarization_lags.begin(), l.diarization_lags.end());
      d.received_seconds = p.received_seconds;
      d.dropped_seconds = p.dropped_seconds;
      d.compute_seconds = p.compute_seconds;
      std::lock_guard lock(l.speaker_delays->mutex);
      d.speaker_delays = l.speaker_delays->delays;
      d.words = l.speaker_delays->pending_words;
      f.diarization = std::move(d);
    }
    if (live[s].counters) {
      total += live[s].counters->to_stage_times();
      profiled = true;
    }
  }
  if (profiled) run.profile = total;
  return run;
}

}  // namespace earshot::bench

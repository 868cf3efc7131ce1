#include "bench/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/sample_rate.h"

namespace earshot::bench {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

// Tracks since when each hypothesis position has shown its current text.
class SightingTracker {
 public:
  struct Since {
    std::string text;
    double wall, audio;
  };
  void update(const std::vector<Word>& hypothesis, double wall, double audio) {
    if (since_.size() > hypothesis.size()) since_.resize(hypothesis.size());
    for (size_t k = 0; k < hypothesis.size(); ++k) {
      std::string text = trimmed(hypothesis[k].text);
      if (k < since_.size()) {
        if (since_[k].text != text) since_[k] = Since{std::move(text), wall, audio};
      } else {
        since_.push_back(Since{std::move(text), wall, audio});
      }
    }
  }
  // Position k, when it holds `text`; otherwise (processor output inconsistent
  // with hypothesis()) the current emission.
  Since at(size_t k, const std::string& text, double wall, double audio) const {
    if (k < since_.size() && since_[k].text == text) return since_[k];
    return Since{text, wall, audio};
  }

 private:
  std::vector<Since> since_;
};

}  // namespace

ComputeStats ComputeStats::operator-(const ComputeStats& o) const {
  ComputeStats d = *this;
  d.encoder_passes -= o.encoder_passes;
  d.encoder_seconds -= o.encoder_seconds;
  d.decoder_calls -= o.decoder_calls;
  d.decoder_seconds -= o.decoder_seconds;
  return d;
}

ComputeStats& ComputeStats::operator+=(const ComputeStats& o) {
  encoder_passes += o.encoder_passes;
  encoder_seconds += o.encoder_seconds;
  decoder_calls += o.decoder_calls;
  decoder_seconds += o.decoder_seconds;
  available = available || o.available;
  return *this;
}

double SteadyClock::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SteadyClock::sleep_until(double t) {
  const double wait = t - now();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

const char* to_string(Pacing pacing) { return pacing == Pacing::kRealtime ? "realtime" : "as-fast-as-possible"; }

StreamTrace run_stream(OnlineProcessor& processor, std::span<const float> samples, const StreamOptions& options,
                       Clock& clock) {
  if (!(options.chunk_seconds > 0))
    throw Error(ErrorCode::kInvalidArgument, "--chunk must be a positive number of seconds");
  const size_t chunk = std::max<size_t>(1, static_cast<size_t>(std::lround(options.chunk_seconds * kSampleRate)));
  StreamTrace trace;
  trace.audio_seconds = static_cast<double>(samples.size()) / kSampleRate;
  if (options.warmup) processor.warmup();

  SightingTracker sightings;
  std::vector<Word> committed_so_far;
  const double origin = clock.now();
  size_t fed = 0;
  bool finished = false;
  while (!finished) {
    const bool last = fed >= samples.size();
    size_t end = fed;
    if (!last) {
      end = std::min(samples.size(), fed + chunk);
      if (options.pacing == Pacing::kRealtime) {
        clock.sleep_until(origin + static_cast<double>(end) / kSampleRate);
        // Everything that is due by now arrives together.
        const double now_audio = clock.now() - origin;
        while (end < samples.size() &&
               static_cast<double>(std::min(samples.size(), end + chunk)) / kSampleRate <= now_audio + 1e-9)
          end = std::min(samples.size(), end + chunk);
      }
    }
    const double audio_time = static_cast<double>(end) / kSampleRate;
    const double t0 = clock.now();
    ProcessResult result;
    if (last) {
      result = processor.finish();
      finished = true;
    } else {
      processor.insert_audio(samples.subspan(fed, end - fed), audio_time);
      result = processor.process(false);
    }
    std::vector<Word> provisional = processor.provisional();
    const double t1 = clock.now();
    fed = end;

    Emission e;
    e.wall = t1 - origin;
    e.audio = audio_time;
    e.compute = t1 - t0;
    e.committed = static_cast<int>(result.committed.size());
    e.provisional = static_cast<int>(provisional.size());
    trace.emissions.push_back(e);
    trace.compute_wall += e.compute;
    if (options.keep_tails) trace.tails.push_back(provisional);

    const size_t first_new = committed_so_far.size();
    committed_so_far.insert(committed_so_far.end(), result.committed.begin(), result.committed.end());
    std::vector<Word> hypothesis = committed_so_far;
    hypothesis.insert(hypothesis.end(), provisional.begin(), provisional.end());
    sightings.update(hypothesis, e.wall, e.audio);
    for (size_t k = first_new; k < committed_so_far.size(); ++k) {
      CommittedWord w;
      w.word = committed_so_far[k];
      w.commit_wall = e.wall;
      w.commit_audio = e.audio;
      auto seen = sightings.at(k, trimmed(w.word.text), e.wall, e.audio);
      w.first_seen_wall = seen.wall;
      w.first_seen_audio = seen.audio;
      trace.words.push_back(std::move(w));
    }
  }
  trace.elapsed_wall = trace.emissions.empty() ? 0 : trace.emissions.back().wall;
  std::string text;
  for (const Word& w : committed_so_far) text += w.text;
  trace.text = trimmed(text);
  return trace;
}

SystemRun run_system(const ProcessorFactory& factory, const std::vector<std::vector<float>>& audio,
                     const StreamOptions& options, int sessions, const Progress& progress,
                     const std::function<std::unique_ptr<Clock>()>& make_clock) {
  return run_system(FileProcessorFactory([&factory](int) { return factory(); }), audio, options, sessions, progress,
                    make_clock);
}

SystemRun run_system(const FileProcessorFactory& factory, const std::vector<std::vector<float>>& audio,
                     const StreamOptions& options, int sessions, const Progress& progress,
                     const std::function<std::unique_ptr<Clock>()>& make_clock) {
  if (sessions < 1) throw Error(ErrorCode::kInvalidArgument, "--sessions must be at least 1");
  SystemRun run;
  std::mutex mutex;
  const int n_files = static_cast<int>(audio.size());
  auto session_main = [&](int session) {
    std::unique_ptr<Clock> clock = make_clock ? make_clock() : std::make_unique<SteadyClock>();
    for (int i = 0; i < n_files; ++i) {
      const int file = (session + i) % n_files;
      StreamRecord record;
      record.file = file;
      record.session = session;
      ComputeStats stats;
      try {
        StreamHandle handle = factory(file);
        // Warm up outside the stream and outside the compute counters.
        if (options.warmup) handle.processor->warmup();
        const ComputeStats before = handle.stats ? handle.stats() : ComputeStats{};
        StreamOptions stream_options = options;
        stream_options.warmup = false;
        record.trace = run_stream(*handle.processor, audio[file], stream_options, *clock);
        if (handle.stats) stats = handle.stats() - before;
      } catch (const std::exception& e) {
        record.error = e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      run.stats += stats;
      run.streams.push_back(std::move(record));
      if (progress) progress(session, i + 1, n_files);
    }
  };
  SteadyClock wall;
  const double start = wall.now();
  if (sessions == 1) {
    session_main(0);
  } else {
    std::vector<std::thread> threads;
    for (int s = 0; s < sessions; ++s) threads.emplace_back(session_main, s);
    for (auto& t : threads) t.join();
  }
  run.elapsed_wall = wall.now() - start;
  std::sort(run.streams.begin(), run.streams.end(), [](const StreamRecord& a, const StreamRecord& b) {
    return a.session != b.session ? a.session < b.session : a.file < b.file;
  });
  return run;
}

}  // namespace earshot::bench

#include "bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace earshot::bench {

Distribution make_distribution(std::vector<double> values) {
  Distribution d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<long>(values.size());
  if (values.empty()) return d;
  auto percentile = [&](double p) {
    const double rank = p * static_cast<double>(values.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(values.size() - 1, lo + 1);
    return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
  };
  d.min = values.front();
  d.max = values.back();
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.median = percentile(0.5);
  d.p90 = percentile(0.9);
  d.values = std::move(values);
  return d;
}

std::optional<double> SystemResult::rtf_cpu() const {
  if (!cpu_seconds || audio_seconds <= 0) return std::nullopt;
  return *cpu_seconds / audio_seconds;
}
std::optional<double> SystemResult::encoder_ms_per_pass() const {
  if (!compute.available || compute.encoder_passes == 0) return std::nullopt;
  return 1000.0 * compute.encoder_seconds / static_cast<double>(compute.encoder_passes);
}
std::optional<double> SystemResult::decoder_ms_per_pass() const {
  if (!compute.available || compute.encoder_passes == 0) return std::nullopt;
  return 1000.0 * compute.decoder_seconds / static_cast<double>(compute.encoder_passes);
}
std::optional<double> SystemResult::passes_per_audio_second() const {
  if (!compute.available || audio_seconds <= 0) return std::nullopt;
  return static_cast<double>(compute.encoder_passes) / audio_seconds;
}

std::optional<double> SystemResult::decoder_calls_per_pass() const {
  if (!compute.available || compute.encoder_passes == 0) return std::nullopt;
  return static_cast<double>(compute.decoder_calls) / static_cast<double>(compute.encoder_passes);
}

SystemResult summarize(const std::string& name, const SystemRun& run, const std::vector<Utterance>& utterances,
                       Pacing pacing, NormalizerKind normalizer) {
  SystemResult s;
  s.name = name;
  s.elapsed_wall_seconds = run.elapsed_wall;
  s.compute = run.stats;
  const bool realtime = pacing == Pacing::kRealtime;
  std::vector<double> delays, provisional, first, first_provisional;
  std::map<int, SessionResult> sessions;
  std::map<int, std::vector<double>> session_lags;
  for (const StreamRecord& rec : run.streams) {
    FileResult f;
    f.file = rec.file;
    f.session = rec.session;
    if (rec.file >= 0 && rec.file < static_cast<int>(utterances.size())) f.id = utterances[rec.file].id;
    const StreamTrace& t = rec.trace;
    f.audio_seconds = t.audio_seconds;
    f.hypothesis = t.text;
    f.error = rec.error;
    f.elapsed_wall = t.elapsed_wall;
    f.compute_wall = t.compute_wall;
    f.emissions = t.emissions;
    if (!rec.error.empty()) s.failed_streams++;
    const std::string reference =
        rec.file >= 0 && rec.file < static_cast<int>(utterances.size()) ? utterances[rec.file].reference : "";
    f.score = score_text(reference, t.text, normalizer);
    std::vector<double> d, pd;
    for (const CommittedWord& w : t.words) {
      double end = w.word.end;
      if (end > w.commit_audio + 1e-9) {
        f.future_timestamps++;
        end = w.commit_audio;
      }
      end = std::max(0.0, end);
      d.push_back((realtime ? w.commit_wall : w.commit_audio) - end);
      pd.push_back((realtime ? w.first_seen_wall : w.first_seen_audio) - end);
    }
    if (!d.empty()) {
      f.first_word_delay = d.front();
      f.first_word_provisional_delay = pd.front();
      f.time_to_first_commit = realtime ? t.words.front().commit_wall : t.words.front().commit_audio;
      first.push_back(d.front());
      first_provisional.push_back(pd.front());
    }
    delays.insert(delays.end(), d.begin(), d.end());
    provisional.insert(provisional.end(), pd.begin(), pd.end());
    f.delay = make_distribution(std::move(d));
    f.provisional_delay = make_distribution(std::move(pd));
    SessionResult& sr = sessions[rec.session];
    sr.session = rec.session;
    sr.audio_seconds += t.audio_seconds;
    if (realtime) {
      double max_lag = 0;
      for (const Emission& e : t.emissions) {
        session_lags[rec.session].push_back(e.wall - e.audio);
        max_lag = std::max(max_lag, e.wall - e.audio);
      }
      f.max_lag = max_lag;
    }
    s.words += f.score.words;
    s.characters += f.score.characters;
    s.audio_seconds += t.audio_seconds;
    s.compute_wall_seconds += t.compute_wall;
    s.future_timestamps += f.future_timestamps;
    s.files.push_back(std::move(f));
  }
  for (auto& [index, sr] : sessions) {
    auto it = session_lags.find(index);
    if (realtime && it != session_lags.end() && !it->second.empty()) {
      const std::vector<double>& lags = it->second;
      sr.mean_lag = std::accumulate(lags.begin(), lags.end(), 0.0) / static_cast<double>(lags.size());
      sr.max_lag = *std::max_element(lags.begin(), lags.end());
      sr.final_lag = lags.back();
    }
    s.sessions.push_back(sr);
  }
  s.delay = make_distribution(std::move(delays));
  s.provisional_delay = make_distribution(std::move(provisional));
  s.first_word_delay = make_distribution(std::move(first));
  s.first_word_provisional_delay = make_distribution(std::move(first_provisional));
  return s;
}

}  // namespace earshot::bench

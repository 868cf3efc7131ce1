#include "bench/capacity_report.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "common/json_text.h"

namespace earshot::bench {

ProfileSummary summarize_profile(const StageTimes& t, double audio_seconds) {
  ProfileSummary s;
  const double audio = audio_seconds > 0 ? audio_seconds : 1;
  const double passes = static_cast<double>(t.encoder_passes);
  StageTimes& ms = s.ms_per_audio_second;
  ms.mel = 1000 * t.mel / audio;
  ms.vad = 1000 * t.vad / audio;
  ms.encoder = 1000 * t.encoder / audio;
  ms.decoder = 1000 * t.decoder / audio;
  ms.policy = 1000 * t.policy / audio;
  ms.protocol = 1000 * t.protocol / audio;
  ms.encoder_passes = t.encoder_passes;
  ms.decoder_calls = t.decoder_calls;
  s.compute_rtf = t.total() / audio;
  s.passes_per_second = passes / audio;
  if (t.encoder_passes > 0) {
    s.decoder_steps_per_pass = static_cast<double>(t.decoder_calls) / passes;
    s.encoder_ms_per_pass = 1000 * (t.encoder + t.mel) / passes;
    s.decoder_ms_per_pass = 1000 * t.decoder / passes;
  }
  s.encoder_share = t.total() > 0 ? t.encoder / t.total() : 0;
  return s;
}

namespace {

void write_profile_json(std::ostream& out, const CapacityRun& run) {
  if (!run.profile) {
    out << "null";
    return;
  }
  const ProfileSummary p = summarize_profile(*run.profile, run.audio_seconds);
  const StageTimes& ms = p.ms_per_audio_second;
  out << "{\"ms_per_audio_second\":{\"mel\":" << json_number(ms.mel) << ",\"vad\":" << json_number(ms.vad)
      << ",\"encoder\":" << json_number(ms.encoder) << ",\"decoder\":" << json_number(ms.decoder)
      << ",\"policy\":" << json_number(ms.policy) << ",\"protocol\":" << json_number(ms.protocol)
      << "},\"encoder_passes\":" << ms.encoder_passes << ",\"decoder_calls\":" << ms.decoder_calls
      << ",\"compute_rtf\":" << json_number(p.compute_rtf)
      << ",\"passes_per_second\":" << json_number(p.passes_per_second)
      << ",\"decoder_steps_per_pass\":" << json_number(p.decoder_steps_per_pass)
      << ",\"encoder_ms_per_pass\":" << json_number(p.encoder_ms_per_pass)
      << ",\"decoder_ms_per_pass\":" << json_number(p.decoder_ms_per_pass)
      << ",\"encoder_share\":" << json_number(p.encoder_share) << "}";
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A run's diarization figures (null without the stage).
void write_diarization_json(std::ostream& out, const CapacityRun& r) {
  if (!r.diarized()) {
    out << "null";
    return;
  }
  double received = 0;
  long words = 0;
  for (const SessionFigures& f : r.per_session) {
    if (!f.diarization) continue;
    received += f.diarization->received_seconds;
    words += f.diarization->words;
  }
  out << "{\"p95_lag_max\":" << json_number(r.max_diarization_p95_lag())
      << ",\"max_lag\":" << json_number(r.max_diarization_lag())
      << ",\"dropped_seconds\":" << json_number(r.diarization_dropped_seconds())
      << ",\"speaker_delay_p50\":" << json_number(r.speaker_delay(0.5))
      << ",\"speaker_delay_p95\":" << json_number(r.speaker_delay(0.95))
      << ",\"speaker_delay_words\":" << r.speaker_delay_words() << ",\"committed_words\":" << words
      << ",\"audio_seconds\":" << json_number(received)
      << ",\"compute_per_audio_second\":" << json_number(r.diarization_compute_per_audio_second()) << "}";
}

void write_session_diarization_json(std::ostream& out, const std::optional<DiarizationFigures>& d) {
  if (!d) {
    out << "null";
    return;
  }
  out << "{\"p95_lag\":" << json_number(d->p95_lag) << ",\"max_lag\":" << json_number(d->max_lag)
      << ",\"audio_seconds\":" << json_number(d->received_seconds)
      << ",\"dropped_seconds\":" << json_number(d->dropped_seconds)
      << ",\"compute_seconds\":" << json_number(d->compute_seconds)
      << ",\"speaker_delay_p50\":" << json_number(d->speaker_delay(0.5))
      << ",\"speaker_delay_p95\":" << json_number(d->speaker_delay(0.95))
      << ",\"speaker_delay_words\":" << d->speaker_delays.size() << ",\"committed_words\":" << d->words << "}";
}

}  // namespace

bool CapacityReport::within(const CapacityRun& run) const {
  return run.within(lag_limit, diarization_lag_limit.value_or(INFINITY));
}

std::string CapacityReport::pass_rule() const {
  std::string rule = "every session's p95 lag under " + fixed(lag_limit, 2) + " s, nothing skipped, no error";
  if (diarization_lag_limit)
    rule +=
        "; its diarization p95 lag under " + fixed(*diarization_lag_limit, 2) + " s and no diarization audio dropped";
  return rule;
}

void write_capacity_json(std::ostream& out, const CapacityReport& report) {
  out << "{\n\"config\":{\"dataset\":" << json_quote(report.dataset)
      << ",\"chunk_seconds\":" << json_number(report.chunk_seconds)
      << ",\"lag_limit\":" << json_number(report.lag_limit)
      << ",\"max_buffered_seconds\":" << json_number(report.max_buffered_seconds)
      << ",\"diarization_lag_limit\":" << json_number(report.diarization_lag_limit)
      << ",\"pass_rule\":" << json_quote(report.pass_rule()) << ",\"command_line\":" << json_quote(report.command_line)
      << ",\"started_utc\":" << json_quote(report.started_utc) << "},\n\"runs\":[";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CapacityRow& row = report.rows[i];
    const CapacityRun& r = row.run;
    out << (i ? "," : "") << "\n{\"system\":" << json_quote(row.system) << ",\"sessions\":" << r.sessions
        << ",\"workers\":" << r.workers << ",\"threads\":" << row.threads << ",\"batch_decode\":" << row.batch_decode
        << ",\"within_lag_limit\":" << (report.within(r) ? "true" : "false")
        << ",\"p95_lag_max\":" << json_number(r.max_p95_lag()) << ",\"max_lag\":" << json_number(r.max_lag())
        << ",\"skipped_seconds\":" << json_number(r.skipped_seconds()) << ",\"fairness\":" << json_number(r.fairness())
        << ",\"memory_per_session_bytes\":" << json_number(r.memory_per_session_bytes())
        << ",\"rss_before_bytes\":" << json_number(r.rss_before_bytes)
        << ",\"rss_peak_bytes\":" << json_number(r.rss_peak_bytes)
        << ",\"drain_seconds_max\":" << json_number(r.max_drain_seconds())
        << ",\"elapsed_seconds\":" << json_number(r.elapsed_seconds)
        << ",\"audio_seconds\":" << json_number(r.audio_seconds) << ",\n \"batching\":";
    if (r.batching) {
      out << "{\"steps\":" << r.batching->steps << ",\"graphs\":" << r.batching->graphs
          << ",\"mean_batch\":" << json_number(r.batching->mean_batch())
          << ",\"max_batch_since_load\":" << r.batching->max_batch << "}";
    } else {
      out << "null";
    }
    out << ",\n \"diarization\":";
    write_diarization_json(out, r);
    out << ",\n \"profile\":";
    write_profile_json(out, r);
    out << ",\n \"per_session\":[";
    for (size_t s = 0; s < r.per_session.size(); ++s) {
      const SessionFigures& f = r.per_session[s];
      out << (s ? "," : "") << "{\"audio_seconds\":" << json_number(f.audio_seconds)
          << ",\"p95_lag\":" << json_number(f.p95_lag) << ",\"max_lag\":" << json_number(f.max_lag)
          << ",\"skipped_seconds\":" << json_number(f.skipped_seconds)
          << ",\"processed_at_feed_end\":" << json_number(f.processed_at_feed_end)
          << ",\"drain_seconds\":" << json_number(f.drain_seconds) << ",\"error\":" << json_quote(f.error)
          << ",\"diarization\":";
      write_session_diarization_json(out, f.diarization);
      out << "}";
    }
    out << "]}";
  }
  out << "],\n\"capacity\":[";
  for (size_t i = 0; i < report.searches.size(); ++i) {
    const CapacitySearch& c = report.searches[i];
    out << (i ? "," : "") << "\n{\"system\":" << json_quote(c.system) << ",\"sessions\":" << c.capacity
        << ",\"reached_max_sessions\":" << (c.reached_max_sessions ? "true" : "false") << "}";
  }
  out << "]\n}\n";
}

void write_capacity_markdown(std::ostream& out, const CapacityReport& report) {
  const bool diarized = report.diarization_lag_limit.has_value();
  out << "# earshot bench --capacity\n\n"
      << "Dataset `" << report.dataset << "`, " << fixed(report.chunk_seconds, 2)
      << " s chunks in real time; within = " << report.pass_rule() << "; audio waiting beyond "
      << fixed(report.max_buffered_seconds, 0) << " s is skipped.\n\n"
      << "| system | sessions | workers x threads | batch | p95 lag s | max lag s | skipped s | fairness | MB/session "
         "| drain s | within | compute RTF | passes/s | steps/pass | enc ms/pass | encoder share |"
      << (diarized ? " diar p95 lag s | diar max lag s | diar dropped s | speaker delay p50 s | speaker delay p95 s | "
                     "diar compute s/s |"
                   : "")
      << "\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
      << (diarized ? "---:|---:|---:|---:|---:|---:|" : "") << "\n";
  for (const CapacityRow& row : report.rows) {
    const CapacityRun& r = row.run;
    out << "| " << row.system << " | " << r.sessions << " | " << r.workers << " x " << row.threads << " | "
        << row.batch_decode << " | " << fixed(r.max_p95_lag(), 2) << " | " << fixed(r.max_lag(), 2) << " | "
        << fixed(r.skipped_seconds(), 1) << " | " << fixed(r.fairness(), 2) << " | "
        << fixed(r.memory_per_session_bytes() / (1024.0 * 1024.0), 0) << " | " << fixed(r.max_drain_seconds(), 1)
        << " | " << (report.within(r) ? "yes" : "no") << " | ";
    if (r.profile) {
      const ProfileSummary p = summarize_profile(*r.profile, r.audio_seconds);
      out << fixed(p.compute_rtf, 3) << " | " << fixed(p.passes_per_second, 2) << " | "
          << fixed(p.decoder_steps_per_pass, 1) << " | " << fixed(p.encoder_ms_per_pass, 1) << " | "
          << fixed(100 * p.encoder_share, 0) << "% |";
    } else {
      out << "- | - | - | - | - |";
    }
    if (diarized && r.diarized()) {
      const auto delay = [&](double p) {
        const std::optional<double> d = r.speaker_delay(p);
        return d ? fixed(*d, 2) : std::string("-");
      };
      out << " " << fixed(r.max_diarization_p95_lag(), 2) << " | " << fixed(r.max_diarization_lag(), 2) << " | "
          << fixed(r.diarization_dropped_seconds(), 1) << " | " << delay(0.5) << " | " << delay(0.95) << " | "
          << fixed(r.diarization_compute_per_audio_second(), 3) << " |";
    } else if (diarized) {
      out << " - | - | - | - | - | - |";
    }
    out << "\n";
  }
  if (!report.searches.empty()) out << "\n";
  for (const CapacitySearch& c : report.searches)
    out << "- **" << c.system << "**: capacity " << (c.reached_max_sessions ? ">= " : "") << c.capacity
        << " real-time session(s)" << (c.reached_max_sessions ? " (--max-sessions)" : "") << "\n";
}

}  // namespace earshot::bench

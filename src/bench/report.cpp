#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

#include "common/json_text.h"

namespace earshot::bench {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string opt(const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : "-"; }
std::string pct(double rate) { return fixed(100.0 * rate, 2); }
std::string dist_cell(const Distribution& d, double Distribution::*field) { return d.count ? fixed(d.*field, 2) : "-"; }

std::optional<double> max_session_lag(const SystemResult& s) {
  std::optional<double> m;
  for (const SessionResult& r : s.sessions)
    if (r.max_lag) m = std::max(m.value_or(*r.max_lag), *r.max_lag);
  return m;
}

struct Column {
  std::string title;
  std::string (*cell)(const SystemResult&);
};

const std::vector<Column>& columns() {
  static const std::vector<Column> c = {
      {"system", [](const SystemResult& s) { return s.name; }},
      {"WER%", [](const SystemResult& s) { return pct(s.words.rate()); }},
      {"S/D/I",
       [](const SystemResult& s) {
         return std::to_string(s.words.substitutions) + "/" + std::to_string(s.words.deletions) + "/" +
                std::to_string(s.words.insertions);
       }},
      {"CER%", [](const SystemResult& s) { return pct(s.characters.rate()); }},
      {"delay p50", [](const SystemResult& s) { return dist_cell(s.delay, &Distribution::median); }},
      {"p90", [](const SystemResult& s) { return dist_cell(s.delay, &Distribution::p90); }},
      {"max", [](const SystemResult& s) { return dist_cell(s.delay, &Distribution::max); }},
      {"first word", [](const SystemResult& s) { return dist_cell(s.first_word_delay, &Distribution::median); }},
      {"prov p50", [](const SystemResult& s) { return dist_cell(s.provisional_delay, &Distribution::median); }},
      {"prov first",
       [](const SystemResult& s) { return dist_cell(s.first_word_provisional_delay, &Distribution::median); }},
      {"RTF cpu", [](const SystemResult& s) { return opt(s.rtf_cpu(), 3); }},
      {"RTF wall", [](const SystemResult& s) { return fixed(s.rtf_wall(), 3); }},
      {"enc ms/pass", [](const SystemResult& s) { return opt(s.encoder_ms_per_pass(), 1); }},
      {"dec ms/pass", [](const SystemResult& s) { return opt(s.decoder_ms_per_pass(), 1); }},
      {"passes/s", [](const SystemResult& s) { return opt(s.passes_per_audio_second(), 2); }},
      {"steps/pass", [](const SystemResult& s) { return opt(s.decoder_calls_per_pass(), 1); }},
      {"peak RSS MB",
       [](const SystemResult& s) {
         return s.peak_rss_bytes ? fixed(static_cast<double>(*s.peak_rss_bytes) / (1024.0 * 1024.0), 0)
                                 : std::string("-");
       }},
      {"max lag", [](const SystemResult& s) { return opt(max_session_lag(s), 2); }},
  };
  return c;
}

std::string json_counts(const ErrorCounts& c) {
  std::ostringstream o;
  o << "{\"reference\":" << c.reference << ",\"correct\":" << c.correct << ",\"substitutions\":" << c.substitutions
    << ",\"deletions\":" << c.deletions << ",\"insertions\":" << c.insertions << ",\"errors\":" << c.errors()
    << ",\"rate\":" << json_number(c.rate()) << "}";
  return o.str();
}

std::string json_distribution(const Distribution& d, bool with_values) {
  std::ostringstream o;
  o << "{\"count\":" << d.count;
  if (d.count) {
    o << ",\"min\":" << json_number(d.min) << ",\"mean\":" << json_number(d.mean)
      << ",\"median\":" << json_number(d.median) << ",\"p90\":" << json_number(d.p90)
      << ",\"max\":" << json_number(d.max);
  } else {
    o << ",\"min\":null,\"mean\":null,\"median\":null,\"p90\":null,\"max\":null";
  }
  if (with_values) {
    o << ",\"values\":[";
    for (size_t i = 0; i < d.values.size(); ++i) o << (i ? "," : "") << json_number(d.values[i]);
    o << "]";
  }
  o << "}";
  return o.str();
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

void write_table(std::ostream& out, const BenchReport& report) {
  const auto& cols = columns();
  std::vector<std::vector<std::string>> rows;
  for (const SystemResult& s : report.systems) {
    std::vector<std::string> row;
    for (const Column& c : cols) row.push_back(c.cell(s));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width;
  for (const Column& c : cols) width.push_back(c.title.size());
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      std::string cell = cells[i];
      const size_t pad = width[i] - cell.size();
      out << (i ? "  " : "") << (i == 0 ? cell + std::string(pad, ' ') : std::string(pad, ' ') + cell);
    }
    out << "\n";
  };
  std::vector<std::string> titles;
  for (const Column& c : cols) titles.push_back(c.title);
  line(titles);
  for (const auto& row : rows) line(row);
  out << "delays in seconds (" << report.config.pacing
      << (report.config.pacing == "realtime" ? ": wall clock from word end to commit"
                                             : ": audio clock, audio fed at commit minus word end")
      << "); RTF = seconds per audio second\n";
  for (const SystemResult& s : report.systems) {
    if (!s.translation) continue;
    const TranslationSummary& t = *s.translation;
    auto dist = [](const Distribution& d) {
      char buf[96];
      if (d.count == 0) return std::string("-");
      std::snprintf(buf, sizeof buf, "median %.2f p90 %.2f max %.2f (n=%ld)", d.median, d.p90, d.max, d.count);
      return std::string(buf);
    };
    char chrf[48] = "-";
    if (t.chrf) std::snprintf(chrf, sizeof chrf, "%.1f (%ld streams)", *t.chrf, t.chrf_streams);
    out << "translation " << s.name << " -> " << t.target_language << ": " << t.segments << " segments, "
        << t.committed_words << " committed words, chrF " << chrf << "\n  first-draft delay "
        << dist(t.first_draft_delay) << "\n  commit delay      " << dist(t.commit_delay) << "\n  final lag         "
        << dist(t.final_lag) << "\n";
    const std::optional<double> all = t.calls_per_minute(t.draft_calls + t.final_calls);
    if (all) {
      char calls[160];
      std::snprintf(calls, sizeof calls, "%.1f per audio minute (drafts %.1f + finals %.1f; %ld calls over %.2f min)",
                    *all, *t.calls_per_minute(t.draft_calls), *t.calls_per_minute(t.final_calls),
                    t.draft_calls + t.final_calls, t.audio_seconds / 60.0);
      out << "  MT calls          " << calls << "\n";
    }
  }
  for (const SystemResult& s : report.systems)
    if (s.diarization) write_diarization_table(out, s.name, *s.diarization);
  for (const SystemResult& s : report.systems) {
    if (!s.keyterms) continue;
    const KeytermSummary& k = *s.keyterms;
    out << "keyterms " << s.name << ": recall " << (k.recall() ? pct(*k.recall()) + "%" : std::string("-")) << " ("
        << k.recognised << " of " << k.in_references << " occurrences in the references), " << k.extra
        << " extra in the hypotheses\n";
    for (const KeytermScore& t : k.terms)
      out << "  " << t.term << ": " << t.recognised << "/" << t.in_references << (t.extra ? ", extra " : "")
          << (t.extra ? std::to_string(t.extra) : "") << "\n";
  }
}

void write_json(std::ostream& out, const BenchReport& report) {
  const BenchConfig& c = report.config;
  out << "{\n\"config\":{\"dataset\":" << json_quote(c.dataset) << ",\"pacing\":" << json_quote(c.pacing)
      << ",\"chunk_seconds\":" << json_number(c.chunk_seconds) << ",\"sessions\":" << c.sessions
      << ",\"threads\":" << c.threads << ",\"normalizer\":" << json_quote(c.normalizer)
      << ",\"command_line\":" << json_quote(c.command_line) << ",\"started_utc\":" << json_quote(c.started_utc)
      << ",\"dataset_problems\":[";
  for (size_t i = 0; i < c.dataset_problems.size(); ++i) out << (i ? "," : "") << json_quote(c.dataset_problems[i]);
  out << "],\"utterances\":[";
  for (size_t i = 0; i < c.utterances.size(); ++i) {
    const Utterance& u = c.utterances[i];
    out << (i ? "," : "") << "\n {\"id\":" << json_quote(u.id) << ",\"audio\":" << json_quote(u.audio_path)
        << ",\"audio_seconds\":" << json_number(u.audio_seconds) << ",\"reference\":" << json_quote(u.reference) << "}";
  }
  out << "]},\n\"systems\":[";
  for (size_t si = 0; si < report.systems.size(); ++si) {
    const SystemResult& s = report.systems[si];
    out << (si ? "," : "") << "\n{\"name\":" << json_quote(s.name) << ",\"detail\":" << json_quote(s.detail)
        << ",\n \"wer\":" << json_counts(s.words) << ",\n \"cer\":" << json_counts(s.characters)
        << ",\n \"delay\":" << json_distribution(s.delay, true)
        << ",\n \"provisional_delay\":" << json_distribution(s.provisional_delay, true)
        << ",\n \"first_word_delay\":" << json_distribution(s.first_word_delay, false)
        << ",\n \"first_word_provisional_delay\":" << json_distribution(s.first_word_provisional_delay, false)
        << ",\n \"audio_seconds\":" << json_number(s.audio_seconds)
        << ",\"elapsed_wall_seconds\":" << json_number(s.elapsed_wall_seconds)
        << ",\"compute_wall_seconds\":" << json_number(s.compute_wall_seconds)
        << ",\"cpu_seconds\":" << json_number(s.cpu_seconds) << ",\"rtf_cpu\":" << json_number(s.rtf_cpu())
        << ",\"rtf_wall\":" << json_number(s.rtf_wall())
        << ",\"peak_rss_bytes\":" << (s.peak_rss_bytes ? std::to_string(*s.peak_rss_bytes) : "null")
        << ",\"peak_rss_scope\":" << json_quote(s.peak_rss_scope)
        << ",\n \"compute\":{\"available\":" << (s.compute.available ? "true" : "false")
        << ",\"encoder_passes\":" << s.compute.encoder_passes
        << ",\"encoder_seconds\":" << json_number(s.compute.encoder_seconds)
        << ",\"decoder_calls\":" << s.compute.decoder_calls
        << ",\"decoder_seconds\":" << json_number(s.compute.decoder_seconds)
        << ",\"encoder_ms_per_pass\":" << json_number(s.encoder_ms_per_pass())
        << ",\"decoder_ms_per_pass\":" << json_number(s.decoder_ms_per_pass())
        << ",\"passes_per_audio_second\":" << json_number(s.passes_per_audio_second())
        << ",\"decoder_calls_per_pass\":" << json_number(s.decoder_calls_per_pass()) << "}"
        << ",\"future_timestamps\":" << s.future_timestamps << ",\"failed_streams\":" << s.failed_streams;
    if (s.translation) {
      const TranslationSummary& t = *s.translation;
      out << ",\n \"translation\":{\"target_language\":" << json_quote(t.target_language)
          << ",\"segments\":" << t.segments << ",\"committed_words\":" << t.committed_words
          << ",\"chrf\":" << json_number(t.chrf) << ",\"chrf_streams\":" << t.chrf_streams
          << ",\"compute_seconds\":" << json_number(t.compute_seconds)
          << ",\"first_draft_delay\":" << json_distribution(t.first_draft_delay, false)
          << ",\"commit_delay\":" << json_distribution(t.commit_delay, true)
          << ",\"final_lag\":" << json_distribution(t.final_lag, false) << ",\"mt_calls\":{\"drafts\":" << t.draft_calls
          << ",\"finals\":" << t.final_calls << ",\"audio_seconds\":" << json_number(t.audio_seconds)
          << ",\"per_minute\":" << json_number(t.calls_per_minute(t.draft_calls + t.final_calls))
          << ",\"drafts_per_minute\":" << json_number(t.calls_per_minute(t.draft_calls))
          << ",\"finals_per_minute\":" << json_number(t.calls_per_minute(t.final_calls)) << "}}";
    }
    if (s.diarization) out << ",\n \"diarization\":" << diarization_json(*s.diarization);
    if (s.keyterms) {
      const KeytermSummary& k = *s.keyterms;
      out << ",\n \"keyterms\":{\"recall\":" << json_number(k.recall()) << ",\"in_references\":" << k.in_references
          << ",\"recognised\":" << k.recognised << ",\"extra\":" << k.extra << ",\"terms\":[";
      for (size_t i = 0; i < k.terms.size(); ++i) {
        const KeytermScore& t = k.terms[i];
        out << (i ? "," : "") << "{\"term\":" << json_quote(t.term) << ",\"in_references\":" << t.in_references
            << ",\"recognised\":" << t.recognised << ",\"extra\":" << t.extra << "}";
      }
      out << "]}";
    }
    out << ",\n \"sessions\":[";
    for (size_t i = 0; i < s.sessions.size(); ++i) {
      const SessionResult& r = s.sessions[i];
      out << (i ? "," : "") << "{\"session\":" << r.session << ",\"audio_seconds\":" << json_number(r.audio_seconds)
          << ",\"mean_lag\":" << json_number(r.mean_lag) << ",\"max_lag\":" << json_number(r.max_lag)
          << ",\"final_lag\":" << json_number(r.final_lag) << "}";
    }
    out << "],\n \"files\":[";
    for (size_t i = 0; i < s.files.size(); ++i) {
      const FileResult& f = s.files[i];
      out << (i ? "," : "") << "\n  {\"id\":" << json_quote(f.id) << ",\"file\":" << f.file
          << ",\"session\":" << f.session << ",\"audio_seconds\":" << json_number(f.audio_seconds)
          << ",\"error\":" << (f.error.empty() ? "null" : json_quote(f.error))
          << ",\"hypothesis\":" << json_quote(f.hypothesis)
          << ",\"reference_normalized\":" << json_quote(f.score.reference_normalized)
          << ",\"hypothesis_normalized\":" << json_quote(f.score.hypothesis_normalized)
          << ",\"wer\":" << json_counts(f.score.words) << ",\"cer\":" << json_counts(f.score.characters)
          << ",\"delay\":" << json_distribution(f.delay, false)
          << ",\"provisional_delay\":" << json_distribution(f.provisional_delay, false)
          << ",\"first_word_delay\":" << json_number(f.first_word_delay)
          << ",\"first_word_provisional_delay\":" << json_number(f.first_word_provisional_delay)
          << ",\"time_to_first_commit\":" << json_number(f.time_to_first_commit)
          << ",\"future_timestamps\":" << f.future_timestamps << ",\"elapsed_wall\":" << json_number(f.elapsed_wall)
          << ",\"compute_wall\":" << json_number(f.compute_wall) << ",\"max_lag\":" << json_number(f.max_lag)
          << ",\"emissions\":[";
      for (size_t k = 0; k < f.emissions.size(); ++k) {
        const Emission& e = f.emissions[k];
        out << (k ? "," : "") << "[" << json_number(e.wall) << "," << json_number(e.audio) << ","
            << json_number(e.compute) << "," << e.committed << "," << e.provisional << "]";
      }
      out << "]}";
    }
    out << "]}";
  }
  out << "\n],\n\"emission_fields\":[\"wall\",\"audio\",\"compute\",\"committed\",\"provisional\"]\n}\n";
}

void write_markdown(std::ostream& out, const BenchReport& report) {
  const BenchConfig& c = report.config;
  out << "## earshot bench\n\n";
  out << "- dataset: `" << c.dataset << "` (" << c.utterances.size() << " files";
  double total = 0;
  for (const Utterance& u : c.utterances) total += u.audio_seconds;
  out << ", " << fixed(total, 1) << " s of audio)\n";
  out << "- pacing: " << c.pacing << ", chunk " << fixed(c.chunk_seconds, 2) << " s, sessions " << c.sessions
      << ", threads " << c.threads << ", normaliser " << c.normalizer << "\n";
  if (!c.command_line.empty()) out << "- command: `" << c.command_line << "`\n";
  if (!c.started_utc.empty()) out << "- started: " << c.started_utc << "\n";
  for (const SystemResult& s : report.systems)
    if (!s.detail.empty()) out << "- " << s.name << ": " << s.detail << "\n";
  out << "\n|";
  for (const Column& col : columns()) out << " " << col.title << " |";
  out << "\n|";
  for (size_t i = 0; i < columns().size(); ++i) out << (i ? " ---: |" : " --- |");
  out << "\n";
  for (const SystemResult& s : report.systems) {
    out << "|";
    for (const Column& col : columns()) out << " " << col.cell(s) << " |";
    out << "\n";
  }
  out << "\nDelays in seconds: "
      << (c.pacing == "realtime"
              ? "wall-clock time from the end of a word in the audio to its commit, computation included"
              : "audio fed when the word was committed minus the end of the word (audio clock)")
      << "; `prov` = first provisional sighting; RTF = seconds per audio second.\n";
  if (!c.dataset_problems.empty()) {
    out << "\nSkipped:\n";
    for (const std::string& p : c.dataset_problems) out << "- " << p << "\n";
  }
  for (const SystemResult& s : report.systems)
    if (s.diarization) write_diarization_markdown(out, s.name, *s.diarization);
  for (const SystemResult& s : report.systems)
    if (s.failed_streams) out << "\n" << s.name << ": " << s.failed_streams << " stream(s) failed (see JSON)\n";
}

void write_svg(std::ostream& out, const BenchReport& report) {
  // One row per system and kind (committed, provisional): a box (p25..p75),
  // median line, whiskers to min/max and the p90 as a tick.
  struct Row {
    std::string label;
    const Distribution* d;
    const char* color;
  };
  std::vector<Row> rows;
  for (const SystemResult& s : report.systems) {
    rows.push_back({s.name + " committed", &s.delay, "#3b6fb6"});
    rows.push_back({s.name + " provisional", &s.provisional_delay, "#e08a2c"});
  }
  double lo = 0, hi = 1;
  for (const Row& r : rows)
    if (r.d->count) {
      lo = std::min(lo, r.d->min);
      hi = std::max(hi, r.d->max);
    }
  const double step = hi - lo <= 2 ? 0.25 : hi - lo <= 5 ? 0.5 : hi - lo <= 10 ? 1 : hi - lo <= 30 ? 5 : 10;
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  const int left = 240, right = 40, top = 50, row_h = 36, width = 960;
  const int height = top + static_cast<int>(rows.size()) * row_h + 60;
  const double plot_w = width - left - right;
  auto x = [&](double v) { return left + (v - lo) / (hi - lo) * plot_w; };
  auto q = [](const Distribution& d, double p) {
    const double rank = p * static_cast<double>(d.values.size() - 1);
    const size_t a = static_cast<size_t>(std::floor(rank)), b = std::min(d.values.size() - 1, a + 1);
    return d.values[a] + (d.values[b] - d.values[a]) * (rank - static_cast<double>(a));
  };
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height << "\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">"
      << xml_escape("Word delay per system (" + report.config.pacing + ", seconds)") << "</text>\n";
  const double axis_y = top + static_cast<double>(rows.size()) * row_h + 10;
  for (double t = lo; t <= hi + 1e-9; t += step) {
    out << "<line x1=\"" << fixed(x(t), 1) << "\" y1=\"" << top - 10 << "\" x2=\"" << fixed(x(t), 1) << "\" y2=\""
        << fixed(axis_y, 1) << "\" stroke=\"#dddddd\"/>\n"
        << "<text x=\"" << fixed(x(t), 1) << "\" y=\"" << fixed(axis_y + 18, 1) << "\" text-anchor=\"middle\">"
        << fixed(t, step < 1 ? 2 : 0) << "</text>\n";
  }
  out << "<text x=\"" << fixed(left + plot_w / 2, 1) << "\" y=\"" << fixed(axis_y + 42, 1)
      << "\" text-anchor=\"middle\">delay (s): box p25-p75, line median, tick p90, whiskers min-max</text>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double cy = top + static_cast<double>(i) * row_h + row_h / 2.0;
    out << "<text x=\"" << left - 10 << "\" y=\"" << fixed(cy + 4, 1) << "\" text-anchor=\"end\">"
        << xml_escape(r.label) << " (n=" << r.d->count << ")</text>\n";
    if (!r.d->count) continue;
    const Distribution& d = *r.d;
    const double p25 = q(d, 0.25), p75 = q(d, 0.75);
    out << "<line x1=\"" << fixed(x(d.min), 1) << "\" y1=\"" << fixed(cy, 1) << "\" x2=\"" << fixed(x(d.max), 1)
        << "\" y2=\"" << fixed(cy, 1) << "\" stroke=\"" << r.color << "\"/>\n"
        << "<rect x=\"" << fixed(x(p25), 1) << "\" y=\"" << fixed(cy - 10, 1) << "\" width=\""
        << fixed(std::max(1.0, x(p75) - x(p25)), 1) << "\" height=\"20\" fill=\"" << r.color
        << "\" fill-opacity=\"0.35\" stroke=\"" << r.color << "\"/>\n"
        << "<line x1=\"" << fixed(x(d.median), 1) << "\" y1=\"" << fixed(cy - 10, 1) << "\" x2=\""
        << fixed(x(d.median), 1) << "\" y2=\"" << fixed(cy + 10, 1) << "\" stroke=\"black\" stroke-width=\"2\"/>\n"
        << "<line x1=\"" << fixed(x(d.p90), 1) << "\" y1=\"" << fixed(cy - 6, 1) << "\" x2=\"" << fixed(x(d.p90), 1)
        << "\" y2=\"" << fixed(cy + 6, 1) << "\" stroke=\"" << r.color << "\" stroke-width=\"2\"/>\n";
    for (double v : {d.min, d.max})
      out << "<line x1=\"" << fixed(x(v), 1) << "\" y1=\"" << fixed(cy - 5, 1) << "\" x2=\"" << fixed(x(v), 1)
          << "\" y2=\"" << fixed(cy + 5, 1) << "\" stroke=\"" << r.color << "\"/>\n";
  }
  out << "</svg>\n";
}

}  // namespace earshot::bench

#include "bench/diarization_metrics.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "bench/metrics.h"
#include "common/error.h"
#include "common/json_text.h"
#include "protocol/rttm.h"

namespace earshot::bench {
namespace fs = std::filesystem;
namespace {

std::string format(const char* pattern, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, v);
  return buf;
}
// A percentage of scored speaker time, "-" when there is none (NaN).
std::string percent_cell(double v) { return std::isfinite(v) ? format("%.2f", v) : "-"; }

void add(DerScore& total, const DerScore& s) {
  total.evaluated_time += s.evaluated_time;
  total.scored_time += s.scored_time;
  total.scored_speech += s.scored_speech;
  total.missed_speech += s.missed_speech;
  total.falarm_speech += s.falarm_speech;
  total.scored_speaker += s.scored_speaker;
  total.missed_speaker += s.missed_speaker;
  total.falarm_speaker += s.falarm_speaker;
  total.speaker_error += s.speaker_error;
}

std::string der_json(const DerScore& s, double collar) {
  std::ostringstream o;
  o << "{\"collar\":" << json_number(collar) << ",\"overlap\":\"scored\""
    << ",\"evaluated_seconds\":" << json_number(s.evaluated_time)
    << ",\"scored_seconds\":" << json_number(s.scored_time)
    << ",\"scored_speaker_seconds\":" << json_number(s.scored_speaker)
    << ",\"missed_seconds\":" << json_number(s.missed_speaker)
    << ",\"false_alarm_seconds\":" << json_number(s.falarm_speaker)
    << ",\"confusion_seconds\":" << json_number(s.speaker_error)
    << ",\"missed_percent\":" << json_number(s.missed_percent())
    << ",\"false_alarm_percent\":" << json_number(s.falarm_percent())
    << ",\"confusion_percent\":" << json_number(s.speaker_error_percent())
    << ",\"der_percent\":" << json_number(s.der_percent()) << ",\"mapping\":[";
  bool first = true;
  for (const auto& [where, pairs] : s.mapping)
    for (const auto& [reference, hypothesis] : pairs) {
      o << (first ? "" : ",") << "[" << json_quote(reference) << "," << json_quote(hypothesis) << "]";
      first = false;
    }
  o << "]}";
  return o.str();
}

// "collar 0.25: missed 1.20% ..." rows of the table.
std::string der_row(const std::string& what, double collar, const DerScore& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-16s %6.2f %8s %12s %10s %7s %9.2f\n", what.c_str(), collar,
                percent_cell(s.missed_percent()).c_str(), percent_cell(s.falarm_percent()).c_str(),
                percent_cell(s.speaker_error_percent()).c_str(), percent_cell(s.der_percent()).c_str(),
                s.scored_speaker);
  return buf;
}

// cpWER in percent; NaN without reference words.
double cpwer_percent(const CpwerScore& s) {
  return s.words.reference > 0 ? 100.0 * s.rate() : std::numeric_limits<double>::quiet_NaN();
}

std::string cpwer_json(const CpwerScore& s, bool mapping) {
  std::ostringstream o;
  o << "{\"reference_words\":" << s.words.reference << ",\"substitutions\":" << s.words.substitutions
    << ",\"deletions\":" << s.words.deletions << ",\"insertions\":" << s.words.insertions
    << ",\"errors\":" << s.words.errors() << ",\"cpwer_percent\":" << json_number(cpwer_percent(s))
    << ",\"reference_speakers\":" << s.reference_speakers << ",\"hypothesis_speakers\":" << s.hypothesis_speakers;
  if (mapping) {
    o << ",\"mapping\":[";
    for (size_t i = 0; i < s.mapping.size(); ++i)
      o << (i ? "," : "") << "[" << (s.mapping[i].first.empty() ? "null" : json_quote(s.mapping[i].first)) << ","
        << (s.mapping[i].second.empty() ? "null" : json_quote(s.mapping[i].second)) << "]";
    o << "]";
  }
  o << "}";
  return o.str();
}

// "cpWER 12.50% (S 1, D 0, I 2 of 24 words; 2 reference, 3 hypothesis speakers)".
std::string cpwer_text(const CpwerScore& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "cpWER %s%% (S %ld, D %ld, I %ld of %ld reference words; %d reference, %d "
                "hypothesis speakers)",
                percent_cell(cpwer_percent(s)).c_str(), s.words.substitutions, s.words.deletions, s.words.insertions,
                s.words.reference, s.reference_speakers, s.hypothesis_speakers);
  return buf;
}

std::string clip_name(const DiarizedClip& c) { return c.session ? c.id + " #" + std::to_string(c.session) : c.id; }

std::string compute_text(const DiarizationSummary& d) {
  std::string out = "compute RTF wall " + format("%.3f", d.rtf_wall());
  if (const std::optional<double> cpu = d.rtf_cpu()) out += ", cpu " + format("%.3f", *cpu);
  return out;
}

// The file AUDIO.extension next to an utterance's audio.
fs::path beside(const Utterance& utterance, const char* extension) {
  fs::path path = utterance.audio_path;
  path.replace_extension(std::string(".") + extension);
  return path;
}

// One entry per utterance: the file AUDIO.extension next to its audio read with
// `read` into a Truth{path, segments}, or none where there is no such file. A
// file whose segments name more than one (file id, channel) is refused: a clip's
// truth describes that clip alone. `kind` and `short_kind` name it in the
// message ("RTTM truth", "truth").
template <typename Truth, typename Read>
std::vector<std::optional<Truth>> load_clip_files(const std::vector<Utterance>& utterances, const char* extension,
                                                  Read read, const char* kind, const char* short_kind) {
  std::vector<std::optional<Truth>> out;
  for (const Utterance& u : utterances) {
    const fs::path path = beside(u, extension);
    if (!fs::is_regular_file(path)) {
      out.emplace_back();
      continue;
    }
    Truth truth{path.string(), read(path)};
    std::set<std::pair<std::string, std::string>> ids;
    for (const auto& s : truth.segments) ids.insert({s.file, s.channel});
    if (ids.size() > 1)
      throw Error(ErrorCode::kInvalidArgument, truth.path + ": the " + kind + " of " + u.audio_path + " holds " +
                                                   std::to_string(ids.size()) + " file ids or channels; a clip's " +
                                                   short_kind + " (AUDIO." + extension +
                                                   " next to it) describes that clip alone");
    out.push_back(std::move(truth));
  }
  return out;
}

}  // namespace

fs::path speaker_truth_path(const Utterance& utterance) { return beside(utterance, "rttm"); }

std::vector<std::optional<SpeakerTruth>> load_speaker_truths(const std::vector<Utterance>& utterances) {
  return load_clip_files<SpeakerTruth>(
      utterances, "rttm", [](const fs::path& p) { return read_rttm(p); }, "RTTM truth", "truth");
}

fs::path word_truth_path(const Utterance& utterance) { return beside(utterance, "stm"); }

std::vector<std::optional<WordTruth>> load_word_truths(const std::vector<Utterance>& utterances) {
  return load_clip_files<WordTruth>(
      utterances, "stm", [](const fs::path& p) { return read_stm(p); }, "STM transcript", "STM");
}

DiarizationSummary summarize_diarization(std::string detail, std::vector<DiarizedClip> clips,
                                         std::optional<double> cpu_seconds) {
  DiarizationSummary d;
  d.detail = std::move(detail);
  d.cpu_seconds = cpu_seconds;
  for (const DiarizedClip& c : clips) {
    d.audio_seconds += c.audio_seconds;
    d.compute_seconds += c.compute_seconds;
    if (c.cpwer) {
      ++d.cpwer_clips;
      if (!d.cpwer) d.cpwer.emplace();
      *d.cpwer += *c.cpwer;
    }
    if (!c.der || !c.der_no_collar) continue;
    ++d.scored_clips;
    if (!d.der) d.der.emplace(), d.der_no_collar.emplace();
    add(*d.der, *c.der);
    add(*d.der_no_collar, *c.der_no_collar);
  }
  d.clips = std::move(clips);
  return d;
}

void write_diarization_table(std::ostream& out, const std::string& system, const DiarizationSummary& d) {
  out << "diarization " << system << " (" << d.detail << "): " << d.clips.size() << " stream(s), "
      << format("%.1f", d.audio_seconds) << " s of audio, " << compute_text(d) << "\n";
  char header[160];
  std::snprintf(header, sizeof header, "  %-16s %6s %8s %12s %10s %7s %9s\n", "clip", "collar", "missed%",
                "false alarm%", "confusion%", "DER%", "scored s");
  out << header;
  for (const DiarizedClip& c : d.clips) {
    const std::string name = clip_name(c);
    if (!c.der) {
      out << "  " << name << ": no RTTM truth (no " << c.id << ".rttm next to its audio): compute only, RTF wall "
          << format("%.3f", c.audio_seconds > 0 ? c.compute_seconds / c.audio_seconds : 0.0) << ", " << c.speakers
          << " speaker(s) in " << c.turns.size() << " turn(s)\n";
      continue;
    }
    out << der_row(name, kDiarizationCollar, *c.der) << der_row(name, 0.0, *c.der_no_collar);
  }
  if (d.der) {
    const std::string total = "total (" + std::to_string(d.scored_clips) + ")";
    out << der_row(total, kDiarizationCollar, *d.der) << der_row(total, 0.0, *d.der_no_collar);
  } else {
    out << "  no clip has an RTTM truth (AUDIO.rttm next to the audio): no DER\n";
  }
  out << "  DER = missed + false alarm + confusion over scored speaker time (md-eval.pl's; overlap scored)\n";
  if (!d.cpwer) {
    out << "  no clip has an STM transcript (AUDIO.stm next to the audio): no cpWER\n";
    return;
  }
  for (const DiarizedClip& c : d.clips)
    out << "  " << clip_name(c) << ": " << (c.cpwer ? cpwer_text(*c.cpwer) : "no STM transcript: no cpWER") << "\n";
  out << "  total (" << d.cpwer_clips << "): " << cpwer_text(*d.cpwer) << "\n"
      << "  cpWER = errors of the best one-to-one speaker assignment over the reference words (CHiME-6's)\n";
}

std::string diarization_json(const DiarizationSummary& d) {
  std::ostringstream o;
  o << "{\"detail\":" << json_quote(d.detail) << ",\"audio_seconds\":" << json_number(d.audio_seconds)
    << ",\"compute_wall_seconds\":" << json_number(d.compute_seconds)
    << ",\"cpu_seconds\":" << (d.cpu_seconds ? json_number(*d.cpu_seconds) : "null")
    << ",\"rtf_wall\":" << json_number(d.rtf_wall())
    << ",\"rtf_cpu\":" << (d.rtf_cpu() ? json_number(*d.rtf_cpu()) : "null") << ",\"scored_clips\":" << d.scored_clips
    << ",\n  \"der\":" << (d.der ? der_json(*d.der, kDiarizationCollar) : "null")
    << ",\n  \"der_no_collar\":" << (d.der_no_collar ? der_json(*d.der_no_collar, 0.0) : "null")
    << ",\"cpwer_clips\":" << d.cpwer_clips << ",\"cpwer\":" << (d.cpwer ? cpwer_json(*d.cpwer, false) : "null")
    << ",\n  \"clips\":[";
  for (size_t i = 0; i < d.clips.size(); ++i) {
    const DiarizedClip& c = d.clips[i];
    o << (i ? "," : "") << "\n   {\"id\":" << json_quote(c.id) << ",\"file\":" << c.file << ",\"session\":" << c.session
      << ",\"audio_seconds\":" << json_number(c.audio_seconds)
      << ",\"compute_wall_seconds\":" << json_number(c.compute_seconds)
      << ",\"rtf_wall\":" << json_number(c.audio_seconds > 0 ? c.compute_seconds / c.audio_seconds : 0.0)
      << ",\"words\":" << c.words << ",\"unknown_words\":" << c.unknown_words << ",\"speakers\":" << c.speakers
      << ",\"truth\":" << (c.truth.empty() ? "null" : json_quote(c.truth))
      << ",\"note\":" << (c.der ? "null" : json_quote("no RTTM truth: compute only"))
      << ",\"der\":" << (c.der ? der_json(*c.der, kDiarizationCollar) : "null")
      << ",\"der_no_collar\":" << (c.der_no_collar ? der_json(*c.der_no_collar, 0.0) : "null")
      << ",\"word_truth\":" << (c.word_truth.empty() ? "null" : json_quote(c.word_truth))
      << ",\"cpwer\":" << (c.cpwer ? cpwer_json(*c.cpwer, true) : "null")
      << ",\"turns_rttm\":" << json_quote(protocol::format_rttm(c.turns, protocol::kRttmMilliseconds)) << "}";
  }
  o << "]}";
  return o.str();
}

void write_diarization_markdown(std::ostream& out, const std::string& system, const DiarizationSummary& d) {
  out << "\n### Diarization: " << system << "\n\n- " << d.detail << "\n- " << d.clips.size() << " stream(s), "
      << format("%.1f", d.audio_seconds) << " s of audio; " << compute_text(d)
      << " (the stage's own, apart from the ASR's)\n\n"
      << "| clip | collar | missed % | false alarm % | confusion % | DER % | scored speaker s |\n"
      << "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  auto row = [&](const std::string& name, double collar, const DerScore& s) {
    out << "| " << name << " | " << format("%.2f", collar) << " | " << percent_cell(s.missed_percent()) << " | "
        << percent_cell(s.falarm_percent()) << " | " << percent_cell(s.speaker_error_percent()) << " | "
        << percent_cell(s.der_percent()) << " | " << format("%.2f", s.scored_speaker) << " |\n";
  };
  for (const DiarizedClip& c : d.clips) {
    const std::string name = clip_name(c);
    if (!c.der) {
      out << "| " << name << " | no RTTM truth: compute only | | | | | |\n";
      continue;
    }
    row(name, kDiarizationCollar, *c.der);
    row(name, 0.0, *c.der_no_collar);
  }
  if (d.der) {
    row("**total**", kDiarizationCollar, *d.der);
    row("**total**", 0.0, *d.der_no_collar);
  }
  out << "\nDER = (missed + false alarm + confusion) / scored speaker time, as md-eval.pl, overlap scored; the "
         "truth of a clip is AUDIO.rttm next to it.\n";
  if (!d.cpwer) {
    out << "\nNo cpWER: no clip has an STM transcript (AUDIO.stm next to the audio).\n";
    return;
  }
  out << "\n| clip | cpWER % | substitutions | deletions | insertions | reference words | speakers (ref / hyp) |\n"
      << "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  auto cpwer_row = [&out](const std::string& name, const CpwerScore& s) {
    out << "| " << name << " | " << percent_cell(cpwer_percent(s)) << " | " << s.words.substitutions << " | "
        << s.words.deletions << " | " << s.words.insertions << " | " << s.words.reference << " | "
        << s.reference_speakers << " / " << s.hypothesis_speakers << " |\n";
  };
  for (const DiarizedClip& c : d.clips) {
    if (c.cpwer)
      cpwer_row(clip_name(c), *c.cpwer);
    else
      out << "| " << clip_name(c) << " | no STM transcript | | | | | |\n";
  }
  cpwer_row("**total**", *d.cpwer);
  out << "\ncpWER = the words' errors under the one-to-one assignment of hypothesis to reference speakers with "
         "the fewest (CHiME-6's concatenated minimum-permutation WER), over the reference words; the reference of "
         "a clip is AUDIO.stm next to it, scored after the bench's normaliser.\n";
}

}  // namespace earshot::bench

#include "bench/der.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "bench/text_records.h"
#include "common/error.h"

namespace earshot::bench {
namespace {

// md-eval's tolerance for touching segments of one speaker.
constexpr double kEpsilon = 1e-8;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A time field: a finite decimal number >= 0 (md-eval drops '*' marks).
double parse_time(std::string field, const std::string& name, const std::string& source, size_t line) {
  field.erase(std::remove(field.begin(), field.end(), '*'), field.end());
  return parse_seconds(field, name, source, line);
}

std::string format_seconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", seconds);
  return buf;
}

}  // namespace

std::vector<SpeakerSegment> parse_rttm(std::string_view text, const std::string& source) {
  std::vector<SpeakerSegment> segments;
  std::vector<size_t> lines;
  for_each_record(text, [&](const std::vector<std::string>& fields, size_t line_no) {
    const std::string type = upper(fields[0]);
    if (type == "SPKR-INFO") return;
    if (type != "SPEAKER")
      bad_line(source, line_no, "record type '" + fields[0] + "' is not supported (only SPEAKER and SPKR-INFO)");
    if (fields.size() < 9)
      bad_line(source, line_no,
               "a SPEAKER record has 9 or 10 fields (SPEAKER <file> <channel> <start> <duration> <NA> <NA> "
               "<speaker> <NA> [<NA>]), this one " +
                   std::to_string(fields.size()));
    SpeakerSegment s;
    s.file = fields[1];
    s.channel = lower(fields[2]);
    s.start = parse_time(fields[3], "start", source, line_no);
    s.duration = parse_time(fields[4], "duration", source, line_no);
    s.speaker = fields[7];
    segments.push_back(std::move(s));
    lines.push_back(line_no);
  });
  // One speaker may not overlap itself (md-eval refuses such files too).
  std::vector<size_t> order(segments.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) {
    const SpeakerSegment& s = segments[i];
    return std::tie(s.file, s.channel, s.speaker, s.start, s.duration);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  for (size_t k = 1; k < order.size(); ++k) {
    const SpeakerSegment& a = segments[order[k - 1]];
    const SpeakerSegment& b = segments[order[k]];
    if (a.file == b.file && a.channel == b.channel && a.speaker == b.speaker && b.start < a.end() - kEpsilon)
      bad_line(source, lines[order[k]],
               "speaker " + b.speaker + "'s segment [" + format_seconds(b.start) + ", " + format_seconds(b.end()) +
                   "] overlaps their segment on line " + std::to_string(lines[order[k - 1]]) + " [" +
                   format_seconds(a.start) + ", " + format_seconds(a.end()) + "] (merge them into one)");
  }
  return segments;
}

std::vector<SpeakerSegment> read_rttm(const std::filesystem::path& path) {
  return parse_rttm(read_text(path, "RTTM"), path.string());
}

std::map<std::string, std::vector<TimeRange>> parse_uem(std::string_view text, const std::string& source) {
  std::map<std::string, std::vector<std::pair<TimeRange, size_t>>> ranges;
  for_each_record(text, [&](const std::vector<std::string>& fields, size_t line_no) {
    if (fields.size() < 4)
      bad_line(source, line_no,
               "a UEM record has 4 fields (<file> <channel> <start> <end>), this one " + std::to_string(fields.size()));
    TimeRange r{parse_time(fields[2], "start", source, line_no), parse_time(fields[3], "end", source, line_no)};
    if (r.end <= r.start) bad_line(source, line_no, "the range ends (" + fields[3] + ") before it starts");
    ranges[fields[0]].push_back({r, line_no});
  });
  std::map<std::string, std::vector<TimeRange>> out;
  for (auto& [file, list] : ranges) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0 && list[i].first.start < list[i - 1].first.end)
        bad_line(source, list[i].second,
                 "file " + file + "'s range overlaps the one on line " + std::to_string(list[i - 1].second));
      out[file].push_back(list[i].first);
    }
  }
  return out;
}

std::map<std::string, std::vector<TimeRange>> read_uem(const std::filesystem::path& path) {
  return parse_uem(read_text(path, "UEM"), path.string());
}

void write_rttm(const std::filesystem::path& path, const std::vector<SpeakerSegment>& segments) {
  const std::string text = protocol::format_rttm(segments, protocol::kRttmMicroseconds);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error(ErrorCode::kIo, "cannot write RTTM file " + path.string());
}

double DerScore::percent(double seconds) const {
  if (scored_speaker <= 0) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * seconds / scored_speaker;
}

std::vector<int> max_weight_assignment(const std::vector<std::vector<double>>& weight) {
  const size_t rows = weight.size();
  std::vector<int> result(rows, -1);
  if (rows == 0 || weight[0].empty()) return result;
  const size_t cols = weight[0].size();
  for (const auto& row : weight)
    if (row.size() != cols) throw Error(ErrorCode::kInternal, "max_weight_assignment: rows of different lengths");
  // The Hungarian method with potentials over n <= m (rows and columns swapped
  // when there are more rows), minimising the negated weight; 1-based.
  const bool swap = rows > cols;
  const size_t n = swap ? cols : rows, m = swap ? rows : cols;
  auto cost = [&](size_t i, size_t j) { return -(swap ? weight[j - 1][i - 1] : weight[i - 1][j - 1]); };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0.0), v(m + 1, 0.0);
  std::vector<size_t> p(m + 1, 0), way(m + 1, 0);
  for (size_t i = 1; i <= n; ++i) {
    p[0] = i;
    size_t j0 = 0;
    std::vector<double> minv(m + 1, inf);
    std::vector<char> used(m + 1, 0);
    do {
      used[j0] = 1;
      const size_t i0 = p[j0];
      double delta = inf;
      size_t j1 = 0;
      for (size_t j = 1; j <= m; ++j) {
        if (used[j]) continue;
        const double cur = cost(i0, j) - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      if (j1 == 0) throw Error(ErrorCode::kInternal, "max_weight_assignment: weights must be finite");
      for (size_t j = 0; j <= m; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const size_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  for (size_t j = 1; j <= m; ++j) {
    if (p[j] == 0) continue;
    const size_t row = swap ? j - 1 : p[j] - 1, col = swap ? p[j] - 1 : j - 1;
    result[row] = static_cast<int>(col);
  }
  return result;
}

namespace {

// A stretch between two consecutive boundaries inside the evaluated region.
struct Piece {
  double duration;
  std::vector<int> ref, hyp;  // speakers active throughout
  bool scored;
};

void check_segment(const SpeakerSegment& s, const char* side) {
  if (!std::isfinite(s.start) || !std::isfinite(s.duration) || s.start < 0 || s.duration < 0)
    throw Error(ErrorCode::kInvalidArgument, std::string(side) + " segment of speaker " + s.speaker + " in " + s.file +
                                                 " needs a finite start and duration >= 0");
}

// Scores one file and channel into `score`.
void score_channel(const std::vector<const SpeakerSegment*>& ref, const std::vector<const SpeakerSegment*>& hyp,
                   const std::vector<TimeRange>& uem, const DerOptions& options, DerScore& score,
                   std::vector<std::pair<std::string, std::string>>& mapping) {
  std::vector<std::string> ref_names, hyp_names;
  for (const auto* s : ref) ref_names.push_back(s->speaker);
  for (const auto* s : hyp) hyp_names.push_back(s->speaker);
  for (auto* names : {&ref_names, &hyp_names}) {
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
  }
  auto index = [](const std::vector<std::string>& names, const std::string& name) {
    return static_cast<int>(std::lower_bound(names.begin(), names.end(), name) - names.begin());
  };

  enum Kind { kRef, kHyp, kUem, kCollar };
  struct Event {
    double time;
    Kind kind;
    int speaker;
    int delta;
  };
  std::vector<Event> events;
  for (const auto* s : ref) {
    const int k = index(ref_names, s->speaker);
    events.push_back({s->start, kRef, k, +1});
    events.push_back({s->end(), kRef, k, -1});
    if (options.collar > 0) {
      for (double boundary : {s->start, s->end()}) {
        events.push_back({boundary - options.collar, kCollar, -1, +1});
        events.push_back({boundary + options.collar, kCollar, -1, -1});
      }
    }
  }
  for (const auto* s : hyp) {
    const int k = index(hyp_names, s->speaker);
    events.push_back({s->start, kHyp, k, +1});
    events.push_back({s->end(), kHyp, k, -1});
  }
  for (const TimeRange& r : uem) {
    events.push_back({r.start, kUem, -1, +1});
    events.push_back({r.end, kUem, -1, -1});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.time < b.time; });

  std::vector<int> ref_active(ref_names.size(), 0), hyp_active(hyp_names.size(), 0);
  int in_uem = 0, in_collar = 0;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < events.size();) {
    const double t = events[i].time;
    for (; i < events.size() && events[i].time == t; ++i) {
      const Event& e = events[i];
      switch (e.kind) {
        case kRef: ref_active[static_cast<size_t>(e.speaker)] += e.delta; break;
        case kHyp: hyp_active[static_cast<size_t>(e.speaker)] += e.delta; break;
        case kUem: in_uem += e.delta; break;
        case kCollar: in_collar += e.delta; break;
      }
    }
    if (i == events.size() || in_uem <= 0) continue;
    Piece piece{events[i].time - t, {}, {}, false};
    for (size_t k = 0; k < ref_active.size(); ++k)
      if (ref_active[k] > 0) piece.ref.push_back(static_cast<int>(k));
    for (size_t k = 0; k < hyp_active.size(); ++k)
      if (hyp_active[k] > 0) piece.hyp.push_back(static_cast<int>(k));
    piece.scored = in_collar <= 0 && (options.score_overlap || piece.ref.size() <= 1);
    pieces.push_back(std::move(piece));
  }

  // The mapping maximises joint speaking time over the evaluated region,
  // collars included (md-eval maps before cutting them out).
  std::vector<std::vector<double>> overlap(ref_names.size(), std::vector<double>(hyp_names.size(), 0.0));
  for (const Piece& p : pieces)
    for (int r : p.ref)
      for (int h : p.hyp) overlap[static_cast<size_t>(r)][static_cast<size_t>(h)] += p.duration;
  const std::vector<int> assigned = max_weight_assignment(overlap);
  std::vector<int> map(ref_names.size(), -1);
  for (size_t r = 0; r < assigned.size(); ++r) {
    if (assigned[r] < 0 || overlap[r][static_cast<size_t>(assigned[r])] <= 0) continue;
    map[r] = assigned[r];
    mapping.emplace_back(ref_names[r], hyp_names[static_cast<size_t>(assigned[r])]);
  }

  for (const Piece& p : pieces) {
    score.evaluated_time += p.duration;
    if (!p.scored) continue;
    const double d = p.duration;
    const size_t nref = p.ref.size(), nhyp = p.hyp.size();
    size_t nmap = 0;
    for (int r : p.ref) {
      const int h = map[static_cast<size_t>(r)];
      if (h >= 0 && std::binary_search(p.hyp.begin(), p.hyp.end(), h)) ++nmap;
    }
    score.scored_time += d;
    if (nref > 0) score.scored_speech += d;
    if (nref > 0 && nhyp == 0) score.missed_speech += d;
    if (nhyp > 0 && nref == 0) score.falarm_speech += d;
    score.scored_speaker += d * static_cast<double>(nref);
    if (nref > nhyp) score.missed_speaker += d * static_cast<double>(nref - nhyp);
    if (nhyp > nref) score.falarm_speaker += d * static_cast<double>(nhyp - nref);
    score.speaker_error += d * static_cast<double>(std::min(nref, nhyp) - nmap);
  }
}

}  // namespace

DerScore score_der(const std::vector<SpeakerSegment>& reference, const std::vector<SpeakerSegment>& hypothesis,
                   const DerOptions& options) {
  if (!std::isfinite(options.collar) || options.collar < 0)
    throw Error(ErrorCode::kInvalidArgument,
                "the DER collar must be a number of seconds >= 0, not " + std::to_string(options.collar));
  for (const auto& [file, ranges] : options.uem)
    for (const TimeRange& r : ranges)
      if (!std::isfinite(r.start) || !std::isfinite(r.end) || r.end < r.start)
        throw Error(ErrorCode::kInvalidArgument, "UEM range [" + std::to_string(r.start) + ", " +
                                                     std::to_string(r.end) + "] of file " + file +
                                                     " must have finite times with end >= start");
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::vector<const SpeakerSegment*>> refs, hyps;
  for (const auto& s : reference) {
    check_segment(s, "reference");
    refs[{s.file, s.channel}].push_back(&s);
  }
  for (const auto& s : hypothesis) {
    check_segment(s, "hypothesis");
    hyps[{s.file, s.channel}].push_back(&s);
  }
  DerScore score;
  std::set<std::string> ref_files, unscored;
  for (const auto& [key, segs] : refs) ref_files.insert(key.first);
  for (const auto& [key, segs] : hyps)
    if (!ref_files.count(key.first)) unscored.insert(key.first);
  score.unscored_hypothesis_files.assign(unscored.begin(), unscored.end());

  for (const auto& [key, ref_segs] : refs) {
    std::vector<TimeRange> uem;
    if (const auto it = options.uem.find(key.first); it != options.uem.end()) {
      uem = it->second;
    } else {
      TimeRange extent{std::numeric_limits<double>::infinity(), 0.0};
      for (const auto* s : ref_segs) {
        extent.start = std::min(extent.start, s->start);
        extent.end = std::max(extent.end, s->end());
      }
      uem.push_back(extent);
    }
    const auto hyp_it = hyps.find(key);
    static const std::vector<const SpeakerSegment*> kNone;
    auto& mapping = score.mapping[key.first + " " + key.second];
    score_channel(ref_segs, hyp_it == hyps.end() ? kNone : hyp_it->second, uem, options, score, mapping);
  }
  return score;
}

}  // namespace earshot::bench

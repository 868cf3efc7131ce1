#include "bench/cpwer.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "bench/der.h"
#include "bench/text_records.h"
#include "common/error.h"

namespace earshot::bench {
namespace {

bool is_ignore(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "ignore_time_segment_in_scoring";
}

// The speakers' runs concatenated, in the order of their first run.
std::vector<SpeakerWords> by_speaker(const std::vector<SpeakerWords>& runs) {
  std::vector<SpeakerWords> out;
  std::map<std::string, size_t> index;
  for (const SpeakerWords& r : runs) {
    const auto [it, added] = index.emplace(r.speaker, out.size());
    if (added) out.push_back({r.speaker, {}});
    std::vector<std::string>& words = out[it->second].words;
    words.insert(words.end(), r.words.begin(), r.words.end());
  }
  return out;
}

}  // namespace

CpwerScore& CpwerScore::operator+=(const CpwerScore& o) {
  words += o.words;
  reference_speakers += o.reference_speakers;
  hypothesis_speakers += o.hypothesis_speakers;
  return *this;
}

CpwerScore score_cpwer(const std::vector<SpeakerWords>& reference_runs,
                       const std::vector<SpeakerWords>& hypothesis_runs) {
  const std::vector<SpeakerWords> ref = by_speaker(reference_runs), hyp = by_speaker(hypothesis_runs);
  CpwerScore score;
  score.reference_speakers = static_cast<int>(ref.size());
  score.hypothesis_speakers = static_cast<int>(hyp.size());
  // Every pair's alignment. Pairing r with h saves |r| + |h| - errors(r, h)
  // (>= 0) errors over leaving both unpaired (|r| deletions, |h| insertions),
  // so the assignment of most savings is the one of fewest errors.
  std::vector<std::vector<ErrorCounts>> pair(ref.size(), std::vector<ErrorCounts>(hyp.size()));
  std::vector<std::vector<double>> saving(ref.size(), std::vector<double>(hyp.size()));
  for (size_t r = 0; r < ref.size(); ++r)
    for (size_t h = 0; h < hyp.size(); ++h) {
      pair[r][h] = align_tokens(ref[r].words, hyp[h].words);
      saving[r][h] =
          static_cast<double>(ref[r].words.size() + hyp[h].words.size()) - static_cast<double>(pair[r][h].errors());
    }
  // The Hungarian method (exact; der.h): every speaker of the smaller side gets a partner.
  const std::vector<int> assigned = max_weight_assignment(saving);
  std::vector<char> paired(hyp.size(), 0);
  for (size_t r = 0; r < ref.size(); ++r) {
    const int h = r < assigned.size() ? assigned[r] : -1;
    if (h >= 0) {
      paired[static_cast<size_t>(h)] = 1;
      score.words += pair[r][static_cast<size_t>(h)];
      score.mapping.emplace_back(ref[r].speaker, hyp[static_cast<size_t>(h)].speaker);
    } else {
      ErrorCounts missed;
      missed.reference = missed.deletions = static_cast<long>(ref[r].words.size());
      score.words += missed;
      score.mapping.emplace_back(ref[r].speaker, "");
    }
  }
  std::vector<std::pair<std::string, std::string>> extra;
  for (size_t h = 0; h < hyp.size(); ++h) {
    if (paired[h]) continue;
    score.words.insertions += static_cast<long>(hyp[h].words.size());
    extra.emplace_back("", hyp[h].speaker);
  }
  std::sort(score.mapping.begin(), score.mapping.end());
  std::sort(extra.begin(), extra.end());
  score.mapping.insert(score.mapping.end(), extra.begin(), extra.end());
  return score;
}

std::vector<StmSegment> parse_stm(std::string_view text, const std::string& source) {
  std::vector<StmSegment> out;
  for_each_record(text, [&](const std::vector<std::string>& fields, size_t line_no) {
    if (fields.size() < 5)
      bad_line(source, line_no,
               "an STM segment has at least 5 fields (<file> <channel> <speaker> <begin> <end> [<label>] "
               "<transcript>), this one " +
                   std::to_string(fields.size()));
    StmSegment s;
    s.file = fields[0];
    s.channel = fields[1];
    s.speaker = fields[2];
    s.begin = parse_seconds(fields[3], "begin time", source, line_no);
    s.end = parse_seconds(fields[4], "end time", source, line_no);
    if (s.end < s.begin) bad_line(source, line_no, "the segment ends (" + fields[4] + ") before it begins");
    size_t first = 5;
    if (first < fields.size() && fields[first].front() == '<' && fields[first].back() == '>') ++first;
    for (size_t i = first; i < fields.size(); ++i) s.transcript += (i > first ? " " : "") + fields[i];
    if (is_ignore(s.speaker) || is_ignore(s.transcript)) return;
    out.push_back(std::move(s));
  });
  return out;
}

std::vector<StmSegment> read_stm(const std::filesystem::path& path) {
  return parse_stm(read_text(path, "STM"), path.string());
}

CpwerScore score_cpwer_words(const std::vector<StmSegment>& reference, const std::vector<Word>& hypothesis,
                             NormalizerKind kind) {
  std::vector<const StmSegment*> order;
  for (const StmSegment& s : reference) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(),
                   [](const StmSegment* a, const StmSegment* b) { return a->begin < b->begin; });
  // Each speaker's text whole, then normalised (a number may span segments).
  std::vector<std::pair<std::string, std::string>> ref_text, hyp_text;
  const auto append = [](std::vector<std::pair<std::string, std::string>>& texts, const std::string& speaker,
                         const std::string& text, const char* separator) {
    auto it = std::find_if(texts.begin(), texts.end(), [&](const auto& t) { return t.first == speaker; });
    if (it == texts.end()) {
      texts.emplace_back(speaker, text);
      return;
    }
    it->second += separator + text;
  };
  for (const StmSegment* s : order) append(ref_text, s->speaker, s->transcript, " ");
  // Words as the plain WER's transcript joins them (each keeps its own leading space).
  for (const Word& w : hypothesis)
    append(hyp_text, w.speaker > 0 ? "S" + std::to_string(w.speaker) : "(none)", w.text, "");
  std::vector<SpeakerWords> ref, hyp;
  for (const auto& [speaker, text] : ref_text) ref.push_back({speaker, split_words(normalize_text(text, kind))});
  for (const auto& [speaker, text] : hyp_text) hyp.push_back({speaker, split_words(normalize_text(text, kind))});
  return score_cpwer(ref, hyp);
}

}  // namespace earshot::bench

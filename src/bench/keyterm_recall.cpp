#include "bench/keyterm_recall.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"

namespace earshot::bench {
namespace {

std::vector<std::string> words_of(const std::string& text, NormalizerKind kind) {
  std::istringstream in(normalize_text(text, kind));
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(std::move(w));
  return out;
}

long count_words(const std::vector<std::string>& text, const std::vector<std::string>& term) {
  if (term.empty() || term.size() > text.size()) return 0;
  long n = 0;
  for (size_t i = 0; i + term.size() <= text.size();) {
    if (std::equal(term.begin(), term.end(), text.begin() + static_cast<std::ptrdiff_t>(i))) {
      ++n;
      i += term.size();
    } else {
      ++i;
    }
  }
  return n;
}

}  // namespace

std::optional<double> KeytermSummary::recall() const {
  if (in_references == 0) return std::nullopt;
  return static_cast<double>(recognised) / static_cast<double>(in_references);
}

long count_term(const std::string& text, const std::string& term, NormalizerKind kind) {
  return count_words(words_of(text, kind), words_of(term, kind));
}

KeytermSummary score_keyterms(const std::vector<std::string>& terms, const std::vector<std::string>& references,
                              const std::vector<std::string>& hypotheses, NormalizerKind kind) {
  if (references.size() != hypotheses.size())
    throw Error(ErrorCode::kInternal, "score_keyterms: " + std::to_string(references.size()) + " references but " +
                                          std::to_string(hypotheses.size()) + " hypotheses");
  std::vector<std::vector<std::string>> refs, hyps;
  for (const std::string& r : references) refs.push_back(words_of(r, kind));
  for (const std::string& h : hypotheses) hyps.push_back(words_of(h, kind));
  KeytermSummary out;
  for (const std::string& term : terms) {
    const std::vector<std::string> words = words_of(term, kind);
    if (words.empty()) continue;
    KeytermScore score{term};
    for (size_t i = 0; i < refs.size(); ++i) {
      const long in_ref = count_words(refs[i], words), in_hyp = count_words(hyps[i], words);
      score.in_references += in_ref;
      score.recognised += std::min(in_ref, in_hyp);
      score.extra += std::max(0L, in_hyp - in_ref);
    }
    out.in_references += score.in_references;
    out.recognised += score.recognised;
    out.extra += score.extra;
    out.terms.push_back(std::move(score));
  }
  return out;
}

}  // namespace earshot::bench

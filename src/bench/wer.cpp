#include "bench/wer.h"

#include <algorithm>
#include <cstdint>

namespace earshot::bench {

double ErrorCounts::rate() const {
  if (reference == 0) return static_cast<double>(insertions);
  return static_cast<double>(errors()) / static_cast<double>(reference);
}

ErrorCounts& ErrorCounts::operator+=(const ErrorCounts& o) {
  reference += o.reference;
  correct += o.correct;
  substitutions += o.substitutions;
  deletions += o.deletions;
  insertions += o.insertions;
  return *this;
}

ErrorCounts align_tokens(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  constexpr int kSub = 4, kIns = 3, kDel = 3;
  const size_t n = ref.size(), m = hyp.size();
  // cost[i][j]: aligning ref[0..i) with hyp[0..j); full table for the backtrace.
  std::vector<int64_t> cost((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> int64_t& { return cost[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = static_cast<int64_t>(i) * kDel;
  for (size_t j = 0; j <= m; ++j) at(0, j) = static_cast<int64_t>(j) * kIns;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int64_t diag = at(i - 1, j - 1) + (ref[i - 1] == hyp[j - 1] ? 0 : kSub);
      at(i, j) = std::min({diag, at(i - 1, j) + kDel, at(i, j - 1) + kIns});
    }
  }
  ErrorCounts counts;
  counts.reference = static_cast<long>(n);
  size_t i = n, j = m;
  // Backtrace from the end; on ties prefer the diagonal, then insertion, then
  // deletion (sclite's preference as observed on its alignments).
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0) {
      const bool same = ref[i - 1] == hyp[j - 1];
      if (at(i, j) == at(i - 1, j - 1) + (same ? 0 : kSub)) {
        (same ? counts.correct : counts.substitutions)++;
        --i;
        --j;
        continue;
      }
    }
    if (j > 0 && at(i, j) == at(i, j - 1) + kIns) {
      counts.insertions++;
      --j;
    } else {
      counts.deletions++;
      --i;
    }
  }
  return counts;
}

TextScore score_text(std::string_view reference, std::string_view hypothesis, NormalizerKind kind) {
  TextScore s;
  s.reference_normalized = normalize_text(reference, kind);
  s.hypothesis_normalized = normalize_text(hypothesis, kind);
  s.words = align_tokens(split_words(s.reference_normalized), split_words(s.hypothesis_normalized));
  s.characters = align_tokens(split_characters(s.reference_normalized), split_characters(s.hypothesis_normalized));
  return s;
}

}  // namespace earshot::bench

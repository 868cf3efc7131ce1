// bench --keyterms: how many of the listed terms' occurrences in the references
// the committed words recognised. Texts and terms are normalised alike (the
// bench's normaliser) and split into words; an occurrence is a term's word
// sequence, counted without overlaps. Per utterance and term, the recognised
// occurrences are min(in the reference, in the hypothesis), and the hypothesis'
// surplus counts as extra (a boosted term said where it was not): recall shows
// the gain of a vocabulary, extra its cost, WER the rest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/normalizer.h"

namespace earshot::bench {

struct KeytermScore {
  std::string term;        // as listed
  long in_references = 0;  // occurrences in the references
  long recognised = 0;     // of them, matched by the hypotheses (per utterance)
  long extra = 0;          // occurrences in the hypotheses beyond their reference's
};

struct KeytermSummary {
  std::vector<KeytermScore> terms;  // in the list's order; a term that normalises to nothing is left out
  long in_references = 0, recognised = 0, extra = 0;
  // recognised / in_references; none when no listed term occurs in the references.
  std::optional<double> recall() const;
};

// The number of non-overlapping occurrences of `term` in `text` (both normalised
// by `kind`), word by word.
long count_term(const std::string& text, const std::string& term, NormalizerKind kind);

// references[i] and hypotheses[i] are one utterance's texts.
KeytermSummary score_keyterms(const std::vector<std::string>& terms, const std::vector<std::string>& references,
                              const std::vector<std::string>& hypotheses, NormalizerKind kind);

}  // namespace earshot::bench

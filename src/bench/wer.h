// Word and character error rates from a minimum-cost Levenshtein alignment.
// The costs are sclite's defaults (substitution 4, insertion 3, deletion 3,
// match 0) so that the substitution/insertion/deletion counts agree with
// Debian's sctk `sclite` (checked in tests/bench/wer_sclite_test.cpp); WER is
// (S + D + I) / N with N the reference length.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench/normalizer.h"

namespace earshot::bench {

struct ErrorCounts {
  long reference = 0;  // N: reference units (words or characters)
  long correct = 0;
  long substitutions = 0;
  long deletions = 0;
  long insertions = 0;

  long errors() const { return substitutions + deletions + insertions; }
  // errors / reference; 0 for an empty reference with an empty hypothesis,
  // and the insertion count itself when the reference is empty.
  double rate() const;
  ErrorCounts& operator+=(const ErrorCounts& o);
};

// Aligns two token sequences (words or characters).
ErrorCounts align_tokens(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);

struct TextScore {
  std::string reference_normalized;
  std::string hypothesis_normalized;
  ErrorCounts words;
  ErrorCounts characters;  // code points without whitespace (for scripts without spaces)
};

// Normalises both texts with `kind`, then aligns words and characters.
TextScore score_text(std::string_view reference, std::string_view hypothesis, NormalizerKind kind);

}  // namespace earshot::bench

// chrF (Popović 2015, "chrF: character n-gram F-score for automatic MT
// evaluation"): character n-grams of orders 1..6 over the text with whitespace
// removed (as her chrF++.py and sacreBLEU do), per order the clipped matches
// over the hypothesis' n-grams (precision) and the reference's (recall); chrP
// and chrR are their arithmetic means over the orders, and
//   chrF_beta = (1 + beta^2) chrP chrR / (beta^2 chrP + chrR),  beta = 2.
// Characters are Unicode code points (a CJK character is one, not three bytes).
// An order where neither text has an n-gram is left out of the means; where
// only one has, its precision and recall are 0. A corpus score sums the counts
// of all sentences per order first (statistics add up), so long sentences weigh
// more, as in sacreBLEU's corpus chrF.
#pragma once

#include <array>
#include <string>

namespace earshot::bench {

inline constexpr int kChrfOrder = 6;

struct ChrfStats {
  std::array<double, kChrfOrder> hypothesis{};  // n-grams of order n+1 in the hypothesis
  std::array<double, kChrfOrder> reference{};
  std::array<double, kChrfOrder> matches{};  // clipped: min(count in hypothesis, count in reference) per n-gram

  ChrfStats& operator+=(const ChrfStats& o);
};

ChrfStats chrf_statistics(const std::string& hypothesis, const std::string& reference);
// 0..100; 0 when neither text has a character.
double chrf_score(const ChrfStats& stats, double beta = 2.0);
inline double chrf(const std::string& hypothesis, const std::string& reference) {
  return chrf_score(chrf_statistics(hypothesis, reference));
}

}  // namespace earshot::bench

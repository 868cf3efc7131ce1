#include "bench/chrf.h"

#include <algorithm>
#include <map>
#include <vector>

namespace earshot::bench {
namespace {

// Code points of `text` without whitespace; bytes that are not valid UTF-8 count one each.
std::vector<std::string> characters(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + len > text.size()) len = 1;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) len = 1;
    const std::string ch = text.substr(i, len);
    i += len;
    if (ch == " " || ch == "\t" || ch == "\n" || ch == "\r" || ch == "\xC2\xA0" || ch == "\xE3\x80\x80") continue;
    out.push_back(ch);
  }
  return out;
}

std::map<std::string, int> ngrams(const std::vector<std::string>& chars, size_t n) {
  std::map<std::string, int> out;
  for (size_t i = 0; i + n <= chars.size(); ++i) {
    std::string g;
    for (size_t k = 0; k < n; ++k) g += chars[i + k];
    ++out[g];
  }
  return out;
}

}  // namespace

ChrfStats& ChrfStats::operator+=(const ChrfStats& o) {
  for (int n = 0; n < kChrfOrder; ++n) {
    hypothesis[n] += o.hypothesis[n];
    reference[n] += o.reference[n];
    matches[n] += o.matches[n];
  }
  return *this;
}

ChrfStats chrf_statistics(const std::string& hypothesis, const std::string& reference) {
  const std::vector<std::string> hyp = characters(hypothesis), ref = characters(reference);
  ChrfStats s;
  for (int n = 0; n < kChrfOrder; ++n) {
    const auto h = ngrams(hyp, static_cast<size_t>(n + 1)), r = ngrams(ref, static_cast<size_t>(n + 1));
    for (const auto& [g, count] : h) {
      s.hypothesis[n] += count;
      if (auto it = r.find(g); it != r.end()) s.matches[n] += std::min(count, it->second);
    }
    for (const auto& [g, count] : r) s.reference[n] += count;
  }
  return s;
}

double chrf_score(const ChrfStats& s, double beta) {
  double precision = 0, recall = 0;
  int orders = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    if (s.hypothesis[n] == 0 && s.reference[n] == 0) continue;
    ++orders;
    if (s.hypothesis[n] > 0) precision += s.matches[n] / s.hypothesis[n];
    if (s.reference[n] > 0) recall += s.matches[n] / s.reference[n];
  }
  if (orders == 0) return 0;
  precision /= orders;
  recall /= orders;
  const double b2 = beta * beta;
  const double denominator = b2 * precision + recall;
  return denominator > 0 ? 100 * (1 + b2) * precision * recall / denominator : 0;
}

}  // namespace earshot::bench

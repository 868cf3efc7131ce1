#include "stages/translation/commit_policy.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace earshot::stages::translation {

CommitMode parse_commit_mode(std::string_view name) {
  if (name == "paper") return CommitMode::kPaper;
  if (name == "argmax") return CommitMode::kArgmax;
  if (name == "mass") return CommitMode::kMass;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown commit mode '" + std::string(name) + "' (choose paper, argmax or mass)");
}

std::string_view to_string(CommitMode mode) {
  switch (mode) {
    case CommitMode::kPaper: return "paper";
    case CommitMode::kArgmax: return "argmax";
    case CommitMode::kMass: return "mass";
  }
  return "paper";
}

namespace {

// First index of the largest value: ties go to the earlier source token, and
// scores within rounding of each other (1e-9 relative) are ties, so a plateau of
// equal z-scores is attended at its first column whatever the last bits say.
int argmax(const std::vector<double>& row) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(row.size()); ++i) {
    const double b = row[static_cast<size_t>(best)];
    if (row[static_cast<size_t>(i)] > b + 1e-9 * std::max(1.0, std::abs(b))) best = i;
  }
  return best;
}

std::vector<double> head_average(const TokenAttention& a) {
  std::vector<double> row(static_cast<size_t>(a.n_source), 0.0);
  for (int h = 0; h < a.n_heads; ++h)
    for (int c = 0; c < a.n_source; ++c) row[static_cast<size_t>(c)] += a.at(h, c);
  for (double& v : row) v /= std::max(1, a.n_heads);
  return row;
}

// Median filter along the source axis with reflected edges (as Whisper's
// timing.median_filter pads); rows too short to reflect are left as they are.
std::vector<double> median_filter(const std::vector<double>& row, int width) {
  const int n = static_cast<int>(row.size());
  const int half = width / 2;
  if (width <= 1 || n <= half) return row;
  std::vector<double> out(row.size());
  std::vector<double> window(static_cast<size_t>(width));
  for (int i = 0; i < n; ++i) {
    for (int k = -half; k <= half; ++k) {
      int j = i + k;
      if (j < 0) j = -j;
      if (j >= n) j = 2 * (n - 1) - j;
      window[static_cast<size_t>(k + half)] = row[static_cast<size_t>(j)];
    }
    std::nth_element(window.begin(), window.begin() + half, window.end());
    out[static_cast<size_t>(i)] = window[static_cast<size_t>(half)];
  }
  return out;
}

// Paper mode's score rows: per head, each column z-normalised over the tokens
// up to this one (Welford, population deviation); the first token, with nothing
// before it, keeps its raw row; a column of zero deviation scores 0. Each head's
// row is median-filtered along the source axis, then the heads are averaged.
std::vector<std::vector<double>> paper_scores(const std::vector<TokenAttention>& draft, int median_width) {
  std::vector<std::vector<double>> scores;
  if (draft.empty()) return scores;
  const int n_heads = draft.front().n_heads;
  const int n_source = draft.front().n_source;
  const size_t cells = static_cast<size_t>(n_heads) * static_cast<size_t>(n_source);
  std::vector<double> mean(cells, 0.0), m2(cells, 0.0);
  for (size_t t = 0; t < draft.size(); ++t) {
    const TokenAttention& a = draft[t];
    if (a.n_heads != n_heads || a.n_source != n_source)
      throw Error(ErrorCode::kInternal, "draft attention rows of different shapes");
    const double n = static_cast<double>(t + 1);
    std::vector<double> avg(static_cast<size_t>(n_source), 0.0);
    for (int h = 0; h < n_heads; ++h) {
      std::vector<double> z(static_cast<size_t>(n_source));
      for (int c = 0; c < n_source; ++c) {
        const size_t i = static_cast<size_t>(h) * n_source + c;
        const double x = a.at(h, c);
        const double delta = x - mean[i];
        mean[i] += delta / n;
        m2[i] += delta * (x - mean[i]);
        if (t == 0) {
          z[static_cast<size_t>(c)] = x;
        } else {
          const double sd = std::sqrt(m2[i] / n);
          z[static_cast<size_t>(c)] = sd > 0 ? (x - mean[i]) / sd : 0.0;
        }
      }
      z = median_filter(z, median_width);
      for (int c = 0; c < n_source; ++c) avg[static_cast<size_t>(c)] += z[static_cast<size_t>(c)];
    }
    for (double& v : avg) v /= std::max(1, n_heads);
    scores.push_back(std::move(avg));
  }
  return scores;
}

}  // namespace

std::vector<int> attended_positions(const std::vector<TokenAttention>& draft, const CommitOptions& options) {
  std::vector<int> out;
  if (options.mode == CommitMode::kPaper) {
    for (const auto& row : paper_scores(draft, options.median_width)) out.push_back(argmax(row));
  } else {
    for (const TokenAttention& a : draft) out.push_back(argmax(head_average(a)));
  }
  return out;
}

int accepted_prefix(const std::vector<TokenAttention>& draft, int from, int frontier, const CommitOptions& options) {
  const int n = static_cast<int>(draft.size());
  from = std::clamp(from, 0, n);
  if (frontier <= 0) return from;  // nothing accessible: nothing can depend on it alone
  std::vector<std::vector<double>> scores;
  if (options.mode == CommitMode::kPaper) scores = paper_scores(draft, options.median_width);
  int accepted = from;
  for (int t = from; t < n; ++t) {
    bool ok = false;
    switch (options.mode) {
      case CommitMode::kPaper: ok = argmax(scores[static_cast<size_t>(t)]) < frontier + options.paper_margin; break;
      case CommitMode::kArgmax: ok = argmax(head_average(draft[static_cast<size_t>(t)])) < frontier; break;
      case CommitMode::kMass: {
        const std::vector<double> row = head_average(draft[static_cast<size_t>(t)]);
        double total = 0, accessible = 0;
        for (size_t c = 0; c < row.size(); ++c) {
          total += row[c];
          if (static_cast<int>(c) < frontier) accessible += row[c];
        }
        // Mass within the source span: the rows hold the source columns only.
        ok = total > 0 && accessible / total >= options.mass_threshold;
        break;
      }
    }
    if (!ok) break;
    accepted = t + 1;
  }
  return accepted;
}

}  // namespace earshot::stages::translation

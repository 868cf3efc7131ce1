#include "policy/decoding/token_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/error.h"

namespace earshot::policy {

void log_softmax(std::span<float> row) {
  float max_value = -std::numeric_limits<float>::infinity();
  for (float v : row) max_value = std::max(max_value, v);
  if (!std::isfinite(max_value)) return;
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v - max_value));
  const float log_sum = max_value + static_cast<float>(std::log(sum));
  for (float& v : row) v -= log_sum;
}

void suppress(std::span<float> row, std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    if (t >= 0 && static_cast<size_t>(t) < row.size()) row[t] = -std::numeric_limits<float>::infinity();
  }
}

namespace {

void check_shape(std::span<const float> logprobs, int n_vocab, std::span<const int> frames, int n_sequences) {
  if (n_vocab <= 0 || logprobs.size() != static_cast<size_t>(n_vocab) * n_sequences ||
      frames.size() != static_cast<size_t>(n_sequences)) {
    throw Error(ErrorCode::kInternal, "token decoder got " + std::to_string(logprobs.size()) + " log-probs and " +
                                          std::to_string(frames.size()) + " frames for " + std::to_string(n_sequences) +
                                          " sequences of vocabulary " + std::to_string(n_vocab));
  }
}

void append(Sequence& s, int32_t token, int frame, float logprob) {
  s.tokens.push_back(token);
  s.frames.push_back(frame);
  s.logprobs.push_back(logprob);
  s.sum_logprob += logprob;
}

Sequence strip_eot(Sequence s, int32_t eot) {
  if (!s.tokens.empty() && s.tokens.back() == eot) {
    s.sum_logprob -= s.logprobs.back();
    s.tokens.pop_back();
    s.frames.pop_back();
    s.logprobs.pop_back();
  }
  return s;
}

}  // namespace

void GreedyDecoder::reset() { sequences_.assign(1, Sequence{}); }

DecoderStep GreedyDecoder::update(std::span<const float> logprobs, int n_vocab, std::span<const int> frames) {
  check_shape(logprobs, n_vocab, frames, 1);
  const auto best = std::max_element(logprobs.begin(), logprobs.end());
  const auto token = static_cast<int32_t>(best - logprobs.begin());
  append(sequences_[0], token, frames[0], *best);
  return DecoderStep{{0}, token == eot_};
}

Sequence GreedyDecoder::best() const { return strip_eot(sequences_[0], eot_); }

BeamSearchDecoder::BeamSearchDecoder(int32_t eot, int n_beams) : eot_(eot), n_beams_(n_beams) {
  if (n_beams < 1) {
    throw Error(ErrorCode::kInvalidArgument, "beam search needs at least 1 beam, got " + std::to_string(n_beams));
  }
  reset();
}

void BeamSearchDecoder::reset() {
  sequences_.assign(n_beams_, Sequence{});
  finished_.clear();
}

DecoderStep BeamSearchDecoder::update(std::span<const float> logprobs, int n_vocab, std::span<const int> frames) {
  check_shape(logprobs, n_vocab, frames, n_beams_);
  struct Candidate {
    double score;
    int source;
    int32_t token;
    float logprob;
  };
  std::vector<Candidate> candidates;
  // Beams with identical token histories (all of them on the first step) propose
  // the same continuations; keep one of each.
  std::map<std::vector<int32_t>, bool> seen;
  for (int s = 0; s < n_beams_; ++s) {
    const float* row = logprobs.data() + static_cast<size_t>(s) * n_vocab;
    std::vector<int32_t> order(n_vocab);
    for (int i = 0; i < n_vocab; ++i) order[i] = i;
    const int k = std::min(n_beams_ + 1, n_vocab);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int i = 0; i < k; ++i) {
      const int32_t token = order[i];
      if (!std::isfinite(row[token])) continue;
      std::vector<int32_t> key = sequences_[s].tokens;
      key.push_back(token);
      if (!seen.emplace(std::move(key), true).second) continue;
      candidates.push_back({sequences_[s].sum_logprob + row[token], s, token, row[token]});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<Sequence> next;
  DecoderStep step;
  for (const Candidate& c : candidates) {
    Sequence s = sequences_[c.source];
    append(s, c.token, frames[c.source], c.logprob);
    if (c.token == eot_) {
      finished_.push_back(std::move(s));
      continue;
    }
    next.push_back(std::move(s));
    step.source.push_back(c.source);
    if (static_cast<int>(next.size()) == n_beams_) break;
  }
  if (next.empty()) {
    // Every candidate ended: keep the cache layout valid and finish.
    step.source.assign(n_beams_, 0);
    step.completed = true;
    return step;
  }
  while (static_cast<int>(next.size()) < n_beams_) {  // too few live candidates: repeat the best
    next.push_back(next.front());
    step.source.push_back(step.source.front());
  }
  sequences_ = std::move(next);
  step.completed = static_cast<int>(finished_.size()) >= n_beams_;
  return step;
}

Sequence BeamSearchDecoder::best() const {
  const std::vector<Sequence>& pool = finished_.empty() ? sequences_ : finished_;
  const auto it = std::max_element(pool.begin(), pool.end(),
                                   [](const Sequence& a, const Sequence& b) { return a.sum_logprob < b.sum_logprob; });
  return strip_eot(*it, eot_);
}

}  // namespace earshot::policy

// AOSC, step for step as NeMo's sortformer_modules.py computes it (the published
// sources are the specification; scores in float as torch computes them; top-k ties
// resolved as torch's CPU top-k resolves them, see top_k).
#include "model/sortformer/aosc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace earshot::sortformer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Indices of the k largest values, chosen among equal values as torch.topk(sorted=False)
// on the CPU chooses them (ATen's topk loop: std::partial_sort of (value, index) pairs
// in index order when k * 64 <= n, else std::nth_element at k - 1; the first k). NeMo
// depends on that choice: after a compression the cache can hold one frame twice
// (chosen for two speakers), and the copies score exactly alike in later compressions,
// where which copy is kept sets the cache's order.
std::vector<int> top_k(const std::vector<float>& values, int k) {
  using Element = std::pair<float, int64_t>;
  std::vector<Element> queue(values.size());
  for (size_t i = 0; i < values.size(); ++i) queue[i] = {values[i], static_cast<int64_t>(i)};
  k = std::min<int>(k, static_cast<int>(queue.size()));
  if (k <= 0) return {};
  const auto larger = [](const Element& x, const Element& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  if (static_cast<int64_t>(k) * 64 <= static_cast<int64_t>(queue.size()))
    std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), larger);
  else
    std::nth_element(queue.begin(), queue.begin() + k - 1, queue.end(), larger);
  std::vector<int> out(k);
  for (int i = 0; i < k; ++i) out[i] = static_cast<int>(queue[i].second);
  return out;
}

void append_rows(std::vector<float>& to, std::span<const float> rows) { to.insert(to.end(), rows.begin(), rows.end()); }

// _get_silence_profile: frames whose probabilities sum below sil_threshold update the mean silence embedding.
void silence_profile(const AoscConfig& c, AoscState& s, std::span<const float> emb, std::span<const float> preds,
                     int n) {
  const int S = c.n_speakers, d = c.d;
  std::vector<double> sum(d, 0.0);
  long long count = 0;
  for (int t = 0; t < n; ++t) {
    float p = 0;
    for (int k = 0; k < S; ++k) p += preds[static_cast<size_t>(t) * S + k];
    if (!(p < c.params.sil_threshold)) continue;
    ++count;
    for (int j = 0; j < d; ++j) sum[j] += emb[static_cast<size_t>(t) * d + j];
  }
  if (count == 0) return;
  const long long total = s.n_sil_frames + count;
  for (int j = 0; j < d; ++j)
    s.mean_sil_emb[j] = static_cast<float>((static_cast<double>(s.mean_sil_emb[j]) * s.n_sil_frames + sum[j]) /
                                           static_cast<double>(std::max<long long>(total, 1)));
  s.n_sil_frames = total;
}

}  // namespace

void aosc_compress(const AoscConfig& c, std::span<const float> emb, std::span<const float> preds, int n,
                   std::span<const float> mean_sil_emb, std::vector<float>& out_emb, std::vector<float>& out_preds) {
  const CacheParams& p = c.params;
  const int S = c.n_speakers, d = c.d, L = p.spkcache_len, sil = p.sil_frames_per_spk;
  const int per_spk = L / S - sil;
  const int strong = static_cast<int>(std::floor(per_spk * p.strong_boost_rate));
  const int weak = static_cast<int>(std::floor(per_spk * p.weak_boost_rate));
  const int min_pos = static_cast<int>(std::floor(per_spk * p.min_pos_scores_rate));
  // scores[k][t], speaker-major as NeMo flattens them.
  const int n_all = n + sil;
  std::vector<std::vector<float>> scores(S, std::vector<float>(n_all, kInf));
  const float thr = p.pred_score_threshold, log_half = std::log(0.5f);
  for (int t = 0; t < n; ++t) {
    const float* row = preds.data() + static_cast<size_t>(t) * S;
    float log_1_sum = 0;
    for (int k = 0; k < S; ++k) log_1_sum += std::log(std::max(1.0f - row[k], thr));
    for (int k = 0; k < S; ++k) {
      const float v = std::log(std::max(row[k], thr)) - std::log(std::max(1.0f - row[k], thr)) + log_1_sum - log_half;
      scores[k][t] = row[k] > 0.5f ? v : -kInf;  // _disable_low_scores: non-speech
    }
  }
  for (int k = 0; k < S; ++k) {
    int positive = 0;
    for (int t = 0; t < n; ++t) positive += scores[k][t] > 0;
    if (positive >=
        min_pos)  // overlapped speech (non-positive scores) is dropped when enough single-speaker frames exist
      for (int t = 0; t < n; ++t)
        if (!(scores[k][t] > 0) && preds[static_cast<size_t>(t) * S + k] > 0.5f) scores[k][t] = -kInf;
    if (p.scores_boost_latest > 0)
      for (int t = L; t < n; ++t) scores[k][t] += p.scores_boost_latest;
    for (auto [count, scale] : {std::pair{strong, 2.0f}, std::pair{weak, 1.0f}}) {
      std::vector<float> own(scores[k].begin(), scores[k].begin() + n);
      for (int t : top_k(own, count)) scores[k][t] -= scale * log_half;
    }
  }
  // The spkcache_len best of all speakers' frames and silence slots (+inf, always taken).
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(S) * n_all);
  for (int k = 0; k < S; ++k) flat.insert(flat.end(), scores[k].begin(), scores[k].end());
  std::vector<int> chosen = top_k(flat, L);
  constexpr int kDisabled = std::numeric_limits<int>::max();
  for (int& i : chosen)
    if (flat[i] == -kInf) i = kDisabled;
  std::sort(chosen.begin(), chosen.end());
  out_emb.assign(static_cast<size_t>(L) * d, 0.0f);
  out_preds.assign(static_cast<size_t>(L) * S, 0.0f);
  for (int j = 0; j < L; ++j) {
    const int frame = chosen[j] == kDisabled ? -1 : chosen[j] % n_all;
    if (frame < 0 || frame >= n) {
      std::memcpy(out_emb.data() + static_cast<size_t>(j) * d, mean_sil_emb.data(), d * sizeof(float));
      continue;
    }
    std::memcpy(out_emb.data() + static_cast<size_t>(j) * d, emb.data() + static_cast<size_t>(frame) * d,
                d * sizeof(float));
    std::memcpy(out_preds.data() + static_cast<size_t>(j) * S, preds.data() + static_cast<size_t>(frame) * S,
                S * sizeof(float));
  }
}

std::vector<float> aosc_update(const AoscConfig& c, AoscState& s, std::span<const float> chunk_emb, int n_chunk,
                               std::span<const float> preds, int lc, int rc) {
  const int S = c.n_speakers, d = c.d;
  const CacheParams& p = c.params;
  if (s.mean_sil_emb.empty()) s.mean_sil_emb.assign(d, 0.0f);
  if (p.async_streaming) s.has_cache_preds = true;  // streaming_update_async's state holds them from the start
  const int n_cache = s.n_cache, n_fifo = s.n_fifo, chunk_len = n_chunk - lc - rc;
  if (chunk_len < 0 || preds.size() != static_cast<size_t>(n_cache + n_fifo + n_chunk) * S)
    throw Error(ErrorCode::kInternal, "AOSC: a step's predictions do not match the cache, FIFO and chunk");
  auto pred_rows = [&](int from, int count) {
    return preds.subspan(static_cast<size_t>(from) * S, static_cast<size_t>(count) * S);
  };
  // The FIFO's predictions are this step's; the chunk's frames join the FIFO.
  s.fifo_preds.assign(pred_rows(n_cache, n_fifo).begin(), pred_rows(n_cache, n_fifo).end());
  const std::span<const float> chunk_preds = pred_rows(n_cache + n_fifo + lc, chunk_len);
  append_rows(s.fifo, chunk_emb.subspan(static_cast<size_t>(lc) * d, static_cast<size_t>(chunk_len) * d));
  append_rows(s.fifo_preds, chunk_preds);
  s.n_fifo += chunk_len;
  if (n_fifo + chunk_len > p.fifo_len) {
    int pop = p.update_period;
    pop = std::max(pop, chunk_len - p.fifo_len + n_fifo);
    pop = std::min(pop, n_fifo + chunk_len);
    const std::span<const float> pop_emb(s.fifo.data(), static_cast<size_t>(pop) * d);
    const std::span<const float> pop_preds(s.fifo_preds.data(), static_cast<size_t>(pop) * S);
    silence_profile(c, s, pop_emb, pop_preds, pop);
    append_rows(s.cache, pop_emb);
    if (s.has_cache_preds) append_rows(s.cache_preds, pop_preds);
    const bool first = !s.has_cache_preds;
    std::vector<float> popped_preds(pop_preds.begin(), pop_preds.end());
    s.fifo.erase(s.fifo.begin(), s.fifo.begin() + static_cast<size_t>(pop) * d);
    s.fifo_preds.erase(s.fifo_preds.begin(), s.fifo_preds.begin() + static_cast<size_t>(pop) * S);
    s.n_fifo -= pop;
    s.n_cache += pop;
    if (s.n_cache > p.spkcache_len) {
      if (first) {  // the cache's predictions are this step's at its first compression
        const std::span<const float> cached = pred_rows(0, n_cache);
        s.cache_preds.assign(cached.begin(), cached.end());
        append_rows(s.cache_preds, popped_preds);
        s.has_cache_preds = true;
      }
      std::vector<float> emb, pr;
      aosc_compress(c, s.cache, s.cache_preds, s.n_cache, s.mean_sil_emb, emb, pr);
      s.cache = std::move(emb);
      s.cache_preds = std::move(pr);
      s.n_cache = p.spkcache_len;
      ++s.compressions;
    }
  }
  return std::vector<float>(chunk_preds.begin(), chunk_preds.end());
}

}  // namespace earshot::sortformer

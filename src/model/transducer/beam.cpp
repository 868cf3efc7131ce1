// Beam search for TDT and RNN-T transducers (Decoder::beam), with phrase boosting.
//
// Hypotheses live at frames: a TDT piece or blank moves its hypothesis on by its
// duration (a blank at least one frame), an RNN-T blank by one frame, and a piece
// of duration 0 (RNN-T: every piece) keeps it on its frame, up to max_symbols
// pieces there. Frames are visited in order; the hypotheses waiting at a frame
// are expanded round by round (each round: blank with every duration, and the
// `beam` best pieces by boosted score with every duration), and each round keeps
// its `beam` best candidates. Two hypotheses with the same pieces at the same
// frame have the same prediction-network state, so they merge, the better score
// kept. A candidate's prediction network is advanced only once it survives.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "model/transducer/decoder.h"

namespace earshot::transducer {

namespace {

struct Hyp {
  DecoderState state;
  double score = 0;  // the choices' log-probabilities and the boost's scores
  std::vector<Emission> emissions;
  int symbols = 0;  // pieces emitted on the current frame
};

// A choice from a hypothesis, before its prediction network is advanced.
struct Candidate {
  size_t parent = 0;
  int token = 0;  // a piece, or blank
  int duration_index = -1;
  int duration = 1;
  int destination = 0;  // the frame it waits at next
  double score = 0;
  float log_prob = 0, token_log_prob = 0;
};

double log_sum_exp(const float* v, int n) {
  const float m = *std::max_element(v, v + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(v[i]) - m);
  return m + std::log(sum);
}

bool same_pieces(const Hyp& a, const Hyp& b) {
  return std::equal(a.emissions.begin(), a.emissions.end(), b.emissions.begin(), b.emissions.end(),
                    [](const Emission& x, const Emission& y) { return x.token == y.token; });
}

// Adds `h` to `set`, merging it with a hypothesis of the same pieces (the better score kept).
void add(std::vector<Hyp>& set, Hyp h) {
  for (Hyp& other : set)
    if (same_pieces(other, h)) {
      if (h.score > other.score) other = std::move(h);
      return;
    }
  set.push_back(std::move(h));
}

void keep_best(std::vector<Hyp>& set, int beam) {
  std::stable_sort(set.begin(), set.end(), [](const Hyp& a, const Hyp& b) { return a.score > b.score; });
  if (set.size() > static_cast<size_t>(beam)) set.resize(static_cast<size_t>(beam));
}

}  // namespace

GreedyStats Decoder::beam(std::span<const float> enc_proj, int n_frames, DecoderState& state,
                          std::vector<Emission>& out, int beam, int frame_offset, const TokenBoost* boost) const {
  GreedyStats stats;
  if (n_frames <= 0) return stats;
  beam = std::max(beam, 1);
  const int n_joint = w_->joint_enc.rows;
  const int n_tokens = w_->n_vocab + 1;  // pieces and blank
  const int blank = w_->blank();
  const bool tdt = !w_->durations.empty();
  const int n_durations = tdt ? static_cast<int>(w_->durations.size()) : 1;

  std::map<int, std::vector<Hyp>> waiting;  // frame -> hypotheses that reached it
  waiting[0].push_back({state, 0.0, {}, 0});
  std::vector<Hyp> done;  // at or past the last frame
  std::vector<float> logits;
  std::vector<double> duration_lp(static_cast<size_t>(n_durations), 0.0);
  std::vector<int> order(static_cast<size_t>(w_->n_vocab));
  std::vector<double> piece_score(static_cast<size_t>(w_->n_vocab));

  while (!waiting.empty()) {
    const int t = waiting.begin()->first;
    std::vector<Hyp> active = std::move(waiting.begin()->second);
    waiting.erase(waiting.begin());
    if (t >= n_frames) {
      for (Hyp& h : active) add(done, std::move(h));
      continue;
    }
    keep_best(active, beam);
    while (!active.empty()) {
      std::vector<Candidate> candidates;
      for (size_t i = 0; i < active.size(); ++i) {
        const Hyp& h = active[i];
        joint(enc_proj.subspan(static_cast<size_t>(t) * n_joint, n_joint), h.state, logits);
        ++stats.steps;
        const double lse_tokens = log_sum_exp(logits.data(), n_tokens);
        const double lse_all = log_sum_exp(logits.data(), static_cast<int>(logits.size()));
        if (tdt) {
          const double lse_durations = log_sum_exp(logits.data() + n_tokens, n_durations);
          for (int d = 0; d < n_durations; ++d) duration_lp[d] = logits[n_tokens + d] - lse_durations;
        }
        // Blank moves on (a blank of duration 0 too: it would loop forever).
        for (int d = 0; d < n_durations; ++d) {
          Candidate c;
          c.parent = i;
          c.token = blank;
          c.duration_index = tdt ? d : -1;
          c.duration = tdt ? std::max(w_->durations[d], 1) : 1;
          c.destination = t + c.duration;
          c.score = h.score + (logits[blank] - lse_tokens) + duration_lp[d];
          candidates.push_back(c);
        }
        // The `beam` best pieces by boosted score.
        for (int k = 0; k < w_->n_vocab; ++k)
          piece_score[k] = (logits[k] - lse_tokens) + (boost ? boost_score(*boost, h.state.boost, k) : 0.0);
        std::iota(order.begin(), order.end(), 0);
        const size_t top = std::min(order.size(), static_cast<size_t>(beam));
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                          [&](int a, int b) {
                            return piece_score[a] > piece_score[b] || (piece_score[a] == piece_score[b] && a < b);
                          });
        for (size_t j = 0; j < top; ++j) {
          const int k = order[j];
          for (int d = 0; d < n_durations; ++d) {
            Candidate c;
            c.parent = i;
            c.token = k;
            c.duration_index = tdt ? d : -1;
            c.duration = tdt ? w_->durations[d] : 1;
            const bool stays = !tdt || c.duration == 0;
            c.destination = stays ? (h.symbols + 1 >= w_->max_symbols ? t + 1 : t) : t + c.duration;
            c.score = h.score + piece_score[k] + duration_lp[d];
            c.log_prob = static_cast<float>(logits[k] - lse_all);
            c.token_log_prob = static_cast<float>(logits[k] - lse_tokens);
            candidates.push_back(c);
          }
        }
      }
      // The round keeps its `beam` best candidates; only they advance their prediction networks.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
      if (candidates.size() > static_cast<size_t>(beam)) candidates.resize(static_cast<size_t>(beam));
      std::vector<Hyp> staying;
      for (const Candidate& c : candidates) {
        const Hyp& parent = active[c.parent];
        Hyp h{parent.state, c.score, parent.emissions, 0};
        if (c.token != blank) {
          Emission e;
          e.token = c.token;
          e.frame = frame_offset + t;
          e.duration = c.duration;
          e.duration_index = c.duration_index;
          e.log_prob = c.log_prob;
          e.token_log_prob = c.token_log_prob;
          h.emissions.push_back(e);
          if (boost) h.state.boost = boost_next(*boost, h.state.boost, c.token);
          predict(h.state, c.token);
          if (c.destination == t) h.symbols = parent.symbols + 1;
        }
        add(c.destination == t ? staying : waiting[c.destination], std::move(h));
      }
      active = std::move(staying);
    }
  }
  auto final_score = [&](const Hyp& h) { return h.score + (boost ? boost->finish(h.state.boost) : 0.0); };
  const auto best = std::max_element(done.begin(), done.end(),
                                     [&](const Hyp& a, const Hyp& b) { return final_score(a) < final_score(b); });
  out.insert(out.end(), best->emissions.begin(), best->emissions.end());
  stats.emissions = static_cast<int>(best->emissions.size());
  state = best->state;
  return stats;
}

}  // namespace earshot::transducer

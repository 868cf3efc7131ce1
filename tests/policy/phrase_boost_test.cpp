// Phrase boosting (policy/transducer/phrase_boost.h) and the transducer decoders
// that use it (model/transducer: greedy and beam): phrases spelt in the fewest
// pieces, the trie's scores (a bonus per matched piece, taken back when the match
// breaks off, kept once a phrase is whole), and on hand-built joints whose
// logits are read off the frames: a boosted phrase wins a near-tie exactly when
// its bonus exceeds the gap, a partial match is undone, an empty list changes
// nothing bit for bit, and a beam of 1 decodes as greedy does.
#include "policy/transducer/phrase_boost.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/transducer/decoder.h"

namespace earshot::policy {
namespace {

using transducer::Decoder;
using transducer::DecoderState;
using transducer::DecoderWeights;
using transducer::Emission;
using transducer::Matrix;

const std::string kSp = "\xE2\x96\x81";  // SentencePiece's word start

class Pieces : public TokenPieces {
 public:
  explicit Pieces(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::string text(int token, bool first_in_text) const override {
    return transducer::piece_text(pieces_.at(token), first_in_text);
  }
  bool starts_word(int token) const override { return transducer::piece_starts_word(pieces_.at(token)); }
  std::string language_tag(int token) const override { return transducer::language_tag(pieces_.at(token)); }
  int size() const override { return static_cast<int>(pieces_.size()); }

 private:
  std::vector<std::string> pieces_;
};

// 0 ▁ear 1 shot 2 ▁e 3 ar 4 s 5 hot 6 ▁server 7 ▁the 8 <unk> 9 ▁ 10 ▁Ear
Pieces vocabulary() {
  return Pieces(
      {kSp + "ear", "shot", kSp + "e", "ar", "s", "hot", kSp + "server", kSp + "the", "<unk>", kSp, kSp + "Ear"});
}

// The score a decoder adds along `tokens` from the start, and the state it ends in.
double walk(const TokenBoost& boost, const std::vector<int>& tokens, int* end_state = nullptr) {
  double total = 0;
  int state = 0;
  for (int t : tokens) {
    total += transducer::boost_score(boost, state, t);
    state = transducer::boost_next(boost, state, t);
  }
  if (end_state) *end_state = state;
  return total;
}

TEST(PhraseBoost, PhrasesAreSpeltInTheFewestPieces) {
  const Pieces pieces = vocabulary();
  EXPECT_EQ(spell_phrase("earshot", pieces), (std::vector<int>{0, 1}));
  EXPECT_EQ(spell_phrase("  earshot   server ", pieces), (std::vector<int>{0, 1, 6}));
  EXPECT_EQ(spell_phrase("eshot", pieces), (std::vector<int>{2, 1}));
  EXPECT_TRUE(spell_phrase("zebra", pieces).empty());
  EXPECT_TRUE(spell_phrase("", pieces).empty());
}

TEST(PhraseBoost, NothingToBoostIsNoBoost) {
  const Pieces pieces = vocabulary();
  std::vector<std::string> skipped;
  EXPECT_EQ(PhraseBoost::build({}, pieces, 1.5f), nullptr);
  EXPECT_EQ(PhraseBoost::build({{"zebra", 1.0}, {"earshot", 0.0}}, pieces, 1.5f, &skipped), nullptr);
  EXPECT_EQ(skipped, (std::vector<std::string>{"zebra"}));
}

TEST(PhraseBoost, EachMatchedPieceScoresItsBonusAndAWholePhraseKeepsIt) {
  const auto boost = PhraseBoost::build({{"earshot server", 2.0}}, vocabulary(), 1.5f);
  ASSERT_NE(boost, nullptr);
  EXPECT_EQ(boost->phrases(), 1u);
  int state = 0;
  EXPECT_FLOAT_EQ(walk(*boost, {0}, &state), 3.0f);  // 1.5 x weight 2
  EXPECT_FLOAT_EQ(boost->leave(state), -3.0f);
  EXPECT_FLOAT_EQ(walk(*boost, {0, 1, 6}, &state), 9.0f);
  EXPECT_FLOAT_EQ(boost->leave(state), 0.0f);  // whole: kept whatever follows
  EXPECT_FLOAT_EQ(walk(*boost, {0, 1, 6, 7, 7}), 9.0f);
  EXPECT_FLOAT_EQ(boost->finish(state), 0.0f);
}

TEST(PhraseBoost, APartialMatchIsUndone) {
  const auto boost = PhraseBoost::build({{"earshot server", 1.0}}, vocabulary(), 1.5f);
  int state = 0;
  EXPECT_FLOAT_EQ(walk(*boost, {0, 1, 7}, &state), 0.0f);  // ▁ear shot ▁the: both bonuses taken back
  EXPECT_EQ(state, 0);
  EXPECT_FLOAT_EQ(walk(*boost, {0, 1}, &state), 3.0f);
  EXPECT_FLOAT_EQ(boost->finish(state), -3.0f);  // cut short by the end of decoding
}

TEST(PhraseBoost, ABrokenMatchCanStartAnother) {
  // "the earshot": ▁the ▁ear breaks it after ▁the and starts "earshot" (Aho-Corasick's fail link).
  const auto boost = PhraseBoost::build({{"the earshot", 1.0}, {"earshot", 1.0}}, vocabulary(), 1.0f);
  EXPECT_FLOAT_EQ(walk(*boost, {7, 6, 0, 1}), 2.0f);  // the, server (breaks), ear, shot: "earshot" whole
  EXPECT_FLOAT_EQ(walk(*boost, {7, 0, 1}), 3.0f);     // "the earshot" whole
  EXPECT_FLOAT_EQ(walk(*boost, {7, 7, 0, 1}), 3.0f);  // the (broken by the next), the ear shot
  // A longer phrase broken off after it ended in a shorter one keeps the shorter's bonus.
  const auto nested = PhraseBoost::build({{"the earshot server", 1.0}, {"earshot", 1.0}}, vocabulary(), 1.0f);
  int state = 0;
  EXPECT_FLOAT_EQ(walk(*nested, {7, 0, 1}, &state), 3.0f);
  EXPECT_FLOAT_EQ(nested->leave(state), -1.0f);        // "▁the" is given back, "earshot" kept
  EXPECT_FLOAT_EQ(walk(*nested, {7, 0, 1, 7}), 3.0f);  // ... and a new "▁the" scores again
  EXPECT_FLOAT_EQ(walk(*nested, {7, 0, 1, 6}), 4.0f);  // or the long phrase completes
}

TEST(PhraseBoost, WeightsScaleAndNegativeWeightsPenalise) {
  const auto boost = PhraseBoost::build({{"the", -2.0}, {"earshot", 1.0}}, vocabulary(), 1.0f);
  EXPECT_FLOAT_EQ(walk(*boost, {7}), -2.0f);
  EXPECT_FLOAT_EQ(walk(*boost, {0, 1}), 2.0f);
  // A phrase is boosted as typed and in lower case.
  const auto cased = PhraseBoost::build({{"Earshot", 1.0}}, vocabulary(), 1.0f);
  EXPECT_EQ(cased->phrases(), 2u);
  EXPECT_FLOAT_EQ(walk(*cased, {10, 1}), 2.0f);
  EXPECT_FLOAT_EQ(walk(*cased, {0, 1}), 2.0f);
}

Matrix matrix(int rows, int cols, std::vector<float> data) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = std::move(data);
  return m;
}

// A joint that reads the logits of pieces 0..n-1 and blank off the frame (n + 1
// values, >= 0: the joint's ReLU); the prediction network adds nothing. TDT with
// durations {0, 1, 2}, duration 1 always (bias), so each frame decides once.
DecoderWeights table_driven(int n_pieces) {
  DecoderWeights w;
  w.n_vocab = n_pieces;
  w.pred_dim = 1;
  w.durations = {0, 1, 2};
  w.max_symbols = 3;
  const int n = n_pieces + 1;
  w.embed = matrix(n, 1, std::vector<float>(static_cast<size_t>(n), 0.0f));
  transducer::LstmLayer layer;
  layer.w_ih = matrix(4, 1, {0, 0, 0, 0});
  layer.w_hh = matrix(4, 1, {0, 0, 0, 0});
  layer.bias = {0, 0, 0, 0};
  w.lstm.push_back(layer);
  w.joint_pred = matrix(n, 1, std::vector<float>(static_cast<size_t>(n), 0.0f));
  w.joint_pred_bias.assign(static_cast<size_t>(n), 0.0f);
  std::vector<float> identity(static_cast<size_t>(n) * n, 0.0f);
  for (int i = 0; i < n; ++i) identity[static_cast<size_t>(i) * n + i] = 1.0f;
  w.joint_enc = matrix(n, n, identity);
  w.joint_enc_bias.assign(static_cast<size_t>(n), 0.0f);
  const int n_out = w.n_outputs();
  std::vector<float> out(static_cast<size_t>(n_out) * n, 0.0f);
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i) * n + i] = 1.0f;
  w.joint_out = matrix(n_out, n, out);
  w.joint_out_bias.assign(static_cast<size_t>(n_out), 0.0f);
  w.joint_out_bias[static_cast<size_t>(n) + 1] = 20.0f;  // duration 1
  return w;
}

std::vector<int> tokens_of(const std::vector<Emission>& emissions) {
  std::vector<int> out;
  for (const Emission& e : emissions) out.push_back(e.token);
  return out;
}

std::vector<int> decode(const DecoderWeights& w, const std::vector<float>& frames, int beam, const TokenBoost* boost) {
  Decoder d(&w);
  DecoderState s = d.initial_state();
  std::vector<Emission> out;
  const int n = static_cast<int>(frames.size()) / w.joint_enc.cols;
  const std::vector<float> projected = d.project_encoder(frames, n);
  if (beam > 1)
    d.beam(projected, n, s, out, beam, 0, boost);
  else
    d.greedy(projected, n, s, out, 0, nullptr, boost);
  return tokens_of(out);
}

// Frame logits over vocabulary() (11 pieces) and blank: everything 0 but the listed values.
std::vector<float> frame(std::initializer_list<std::pair<int, float>> logits) {
  std::vector<float> f(12, 0.0f);
  for (const auto& [token, value] : logits) f[static_cast<size_t>(token)] = value;
  return f;
}

std::vector<float> frames(std::initializer_list<std::vector<float>> each) {
  std::vector<float> out;
  for (const auto& f : each) out.insert(out.end(), f.begin(), f.end());
  return out;
}

TEST(PhraseBoostDecoding, ABoostedPhraseWinsANearTieExactlyWhenItsBonusExceedsTheGap) {
  const DecoderWeights w = table_driven(11);
  const float gap = 0.25f;
  // "▁the" leads "▁server" by the gap; blank is far behind.
  const std::vector<float> input = frames({frame({{7, 10.0f + gap}, {6, 10.0f}})});
  for (int beam : {1, 4}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    EXPECT_EQ(decode(w, input, beam, nullptr), (std::vector<int>{7}));
    for (float bonus : {0.5f * gap, gap - 1e-3f, gap + 1e-3f, 2.0f * gap}) {
      const auto boost = PhraseBoost::build({{"server", 1.0}}, vocabulary(), bonus);
      EXPECT_EQ(decode(w, input, beam, boost.get()), (std::vector<int>{bonus > gap ? 6 : 7})) << "bonus " << bonus;
    }
  }
}

TEST(PhraseBoostDecoding, APartialMatchIsUndoneInTheBeam) {
  const DecoderWeights w = table_driven(11);
  // Frame 0: "▁the" leads "▁ear" by 1; frame 1: "s" either way, "shot" (which would
  // complete "earshot") impossible. The bonus lifts "▁ear" at frame 0, but "s"
  // breaks the phrase and takes it back: the beam keeps "▁the s".
  const std::vector<float> input = frames({frame({{7, 11.0f}, {0, 10.0f}}), frame({{4, 10.0f}})});
  const auto boost = PhraseBoost::build({{"earshot", 1.0}}, vocabulary(), 2.0f);
  EXPECT_EQ(decode(w, input, 1, nullptr), (std::vector<int>{7, 4}));
  EXPECT_EQ(decode(w, input, 4, boost.get()), (std::vector<int>{7, 4}));
  // Greedy cannot look ahead: it takes the bonus at frame 0 (and gives it back at frame 1).
  EXPECT_EQ(decode(w, input, 1, boost.get()), (std::vector<int>{0, 4}));
  // Where the phrase does complete, the beam takes it.
  const std::vector<float> completes = frames({frame({{7, 11.0f}, {0, 10.0f}}), frame({{4, 10.0f}, {1, 9.5f}})});
  EXPECT_EQ(decode(w, completes, 4, boost.get()), (std::vector<int>{0, 1}));
}

// Random weights: n_vocab pieces, TDT or RNN-T.
DecoderWeights random_weights(uint32_t seed, bool tdt) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto random = [&](int rows, int cols) {
    std::vector<float> v(static_cast<size_t>(rows) * cols);
    for (float& x : v) x = normal(rng);
    return matrix(rows, cols, v);
  };
  auto vec = [&](int n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
  };
  DecoderWeights w;
  w.n_vocab = 11;
  w.pred_dim = 6;
  if (tdt) w.durations = {0, 1, 2, 3, 4};
  w.max_symbols = 4;
  const int n_enc = 12, n_joint = 10;
  w.embed = random(w.n_vocab + 1, w.pred_dim);
  transducer::LstmLayer layer;
  layer.w_ih = random(4 * w.pred_dim, w.pred_dim);
  layer.w_hh = random(4 * w.pred_dim, w.pred_dim);
  layer.bias = vec(4 * w.pred_dim);
  w.lstm.push_back(layer);
  w.joint_pred = random(n_joint, w.pred_dim);
  w.joint_pred_bias = vec(n_joint);
  w.joint_enc = random(n_joint, n_enc);
  w.joint_enc_bias = vec(n_joint);
  w.joint_out = random(w.n_outputs(), n_joint);
  w.joint_out_bias = vec(w.n_outputs());
  w.joint_out_bias[static_cast<size_t>(w.blank())] += 0.5f;  // some blanks
  return w;
}

std::vector<float> random_frames(uint32_t seed, int n, int n_enc) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> out(static_cast<size_t>(n) * n_enc);
  for (float& x : out) x = normal(rng);
  return out;
}

bool same_bits(const std::vector<Emission>& a, const std::vector<Emission>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Emission& x, const Emission& y) {
    return x.token == y.token && x.frame == y.frame && x.duration == y.duration &&
           std::memcmp(&x.log_prob, &y.log_prob, sizeof(float)) == 0 &&
           std::memcmp(&x.token_log_prob, &y.token_log_prob, sizeof(float)) == 0;
  });
}

// A boost that matches nothing the model says: no arcs, nothing taken back.
class EmptyBoost : public TokenBoost {
 public:
  std::span<const Arc> arcs(int) const override { return {}; }
  float leave(int) const override { return 0.0f; }
};

TEST(PhraseBoostDecoding, AnEmptyListChangesNothingBitForBit) {
  const Pieces pieces = vocabulary();
  for (bool tdt : {true, false}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const DecoderWeights w = random_weights(seed, tdt);
      Decoder d(&w);
      const std::vector<float> input = random_frames(seed + 100, 40, 12);
      const std::vector<float> projected = d.project_encoder(input, 40);
      std::vector<Emission> plain, empty;
      DecoderState s1 = d.initial_state(), s2 = d.initial_state();
      d.greedy(projected, 40, s1, plain, 7);
      // An empty keyterm list builds no boost at all; a boost with nothing to match changes no bit either.
      ASSERT_EQ(PhraseBoost::build(Keyterms{}.phrases(), pieces, 1.5f), nullptr);
      EmptyBoost nothing;
      d.greedy(projected, 40, s2, empty, 7, nullptr, &nothing);
      EXPECT_TRUE(same_bits(plain, empty)) << "seed " << seed << (tdt ? " TDT" : " RNN-T");
      EXPECT_EQ(s1.h, s2.h);
      EXPECT_GT(plain.size(), 3u);
    }
  }
}

TEST(PhraseBoostDecoding, ABeamOfOneDecodesAsGreedyDoes) {
  for (bool tdt : {true, false}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const DecoderWeights w = random_weights(seed, tdt);
      Decoder d(&w);
      const std::vector<float> projected = d.project_encoder(random_frames(seed + 200, 30, 12), 30);
      std::vector<Emission> greedy, beam;
      DecoderState s1 = d.initial_state(), s2 = d.initial_state();
      d.greedy(projected, 30, s1, greedy, 3);
      d.beam(projected, 30, s2, beam, 1, 3);
      EXPECT_TRUE(same_bits(greedy, beam)) << "seed " << seed << (tdt ? " TDT" : " RNN-T");
      EXPECT_EQ(s1.last_token, s2.last_token);
      EXPECT_EQ(s1.h, s2.h);
    }
  }
}

TEST(PhraseBoostDecoding, AWiderBeamEmitsInFrameOrderWithinTheFrames) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const DecoderWeights w = random_weights(seed, true);
    Decoder d(&w);
    const std::vector<float> projected = d.project_encoder(random_frames(seed + 300, 30, 12), 30);
    std::vector<Emission> greedy, beam;
    DecoderState s1 = d.initial_state(), s2 = d.initial_state();
    d.greedy(projected, 30, s1, greedy, 0);
    d.beam(projected, 30, s2, beam, 6, 0);
    EXPECT_FALSE(beam.empty());
    // Emissions stay in frame order and within the frames decoded.
    for (size_t i = 1; i < beam.size(); ++i) EXPECT_LE(beam[i - 1].frame, beam[i].frame);
    for (const Emission& e : beam) EXPECT_LT(e.frame, 30);
  }
}

}  // namespace
}  // namespace earshot::policy

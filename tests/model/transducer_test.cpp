// Greedy transducer decoding on hand-built weights whose joint is read off the
// frame: TDT durations (a blank of duration 0 still advances, duration-0 pieces
// stop at the per-frame bound), RNN-T (pieces until a blank), piece text, and
// products over a file's f16 and Q8_0 blocks.
#include <ggml.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "model/transducer/decoder.h"

namespace earshot::transducer {
namespace {

Matrix matrix(int rows, int cols, std::vector<float> data) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = std::move(data);
  return m;
}

// Pieces 0 and 1, blank 2. Frame [p, b]: logit(piece 1) = p, logit(blank) = b;
// the prediction network contributes nothing, so a frame's decision repeats.
DecoderWeights frame_driven(std::vector<int> durations, std::vector<float> duration_bias, int max_symbols = 3) {
  DecoderWeights w;
  w.n_vocab = 2;
  w.pred_dim = 1;
  w.durations = std::move(durations);
  w.max_symbols = max_symbols;
  w.embed = matrix(3, 1, {0, 0, 0});
  LstmLayer layer;
  layer.w_ih = matrix(4, 1, {0, 0, 0, 0});
  layer.w_hh = matrix(4, 1, {0, 0, 0, 0});
  layer.bias = {0, 0, 0, 0};
  w.lstm.push_back(layer);
  w.joint_pred = matrix(2, 1, {0, 0});
  w.joint_pred_bias = {0, 0};
  w.joint_enc = matrix(2, 2, {1, 0, 0, 1});
  w.joint_enc_bias = {0, 0};
  const int n_out = w.n_outputs();
  w.joint_out = matrix(n_out, 2, std::vector<float>(static_cast<size_t>(n_out) * 2, 0.0f));
  w.joint_out.data[1 * 2 + 0] = 1;  // piece 1 <- p
  w.joint_out.data[2 * 2 + 1] = 1;  // blank <- b
  w.joint_out_bias.assign(n_out, 0.0f);
  for (size_t i = 0; i < duration_bias.size(); ++i) w.joint_out_bias[3 + i] = duration_bias[i];
  return w;
}

std::vector<Emission> decode(const DecoderWeights& w, const std::vector<float>& frames, GreedyStats* stats = nullptr) {
  Decoder d(&w);
  DecoderState s = d.initial_state();
  std::vector<Emission> out;
  const int n = static_cast<int>(frames.size() / 2);
  const GreedyStats st = d.greedy(d.project_encoder(frames, n), n, s, out, 100);
  if (stats) *stats = st;
  return out;
}

TEST(TransducerGreedy, TdtDurationsMoveThroughFrames) {
  // Duration index 2 (duration 2) wins: pieces at frames 0, 2, 4.
  const DecoderWeights w = frame_driven({0, 1, 2}, {0, 0, 5});
  const std::vector<Emission> out = decode(w, {5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].frame, 100);
  EXPECT_EQ(out[1].frame, 102);
  EXPECT_EQ(out[2].frame, 104);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[0].duration, 2);
  EXPECT_EQ(out[0].duration_index, 2);
  EXPECT_LT(out[0].log_prob, out[0].token_log_prob);  // normalised over more outputs
}

TEST(TransducerGreedy, TdtBlankOfDurationZeroStillAdvancesAndPiecesStopAtTheBound) {
  const DecoderWeights w = frame_driven({0, 1}, {5, 0}, 3);  // duration 0 wins everywhere
  GreedyStats stats;
  // Frame 0 blank, frame 1 a piece: three pieces (the bound), then the forced advance.
  const std::vector<Emission> out = decode(w, {0, 5, 5, 0}, &stats);
  ASSERT_EQ(out.size(), 3u);
  for (const Emission& e : out) EXPECT_EQ(e.frame, 101);
  EXPECT_EQ(stats.steps, 4);
  EXPECT_EQ(stats.emissions, 3);
}

TEST(TransducerGreedy, RnntEmitsUntilBlankWithinTheBound) {
  const DecoderWeights w = frame_driven({}, {}, 2);
  GreedyStats stats;
  const std::vector<Emission> out = decode(w, {5, 0, 0, 5, 5, 0}, &stats);
  ASSERT_EQ(out.size(), 4u);  // two on frame 0 (the bound), none on frame 1, two on frame 2
  EXPECT_EQ(out[1].frame, 100);
  EXPECT_EQ(out[2].frame, 102);
  EXPECT_EQ(out[0].duration, 1);
  EXPECT_EQ(out[0].duration_index, -1);
  EXPECT_EQ(stats.steps, 5);
}

TEST(TransducerGreedy, StateCarriesAcrossCalls) {
  DecoderWeights w = frame_driven({0, 1}, {0, 5});
  w.lstm[0].w_ih = matrix(4, 1, {1, 1, 1, 1});
  w.embed = matrix(3, 1, {0.5f, -1.0f, 0.0f});
  Decoder d(&w);
  DecoderState s = d.initial_state();
  const DecoderState fresh = s;
  d.predict(s, 1);
  EXPECT_EQ(s.last_token, 1);
  EXPECT_NE(s.h[0], fresh.h[0]);
  EXPECT_NE(s.c[0], fresh.c[0]);
}

TEST(TransducerPieces, SpaceMarkerAndControlPieces) {
  EXPECT_EQ(piece_text("\xE2\x96\x81hello", true), "hello");
  EXPECT_EQ(piece_text("\xE2\x96\x81hello", false), " hello");
  EXPECT_EQ(piece_text("lo", false), "lo");
  EXPECT_EQ(piece_text("<unk>", false), "");
  EXPECT_TRUE(
      piece_starts_word("\xE2\x96\x81"
                        "a"));
  EXPECT_FALSE(piece_starts_word("a"));
}

TEST(TransducerPieces, LanguageTagsAreReadAndNeverShownAsText) {
  EXPECT_EQ(language_tag("<en-US>"), "en-US");
  EXPECT_EQ(language_tag("\xE2\x96\x81<de-DE>"), "de-DE");
  EXPECT_EQ(language_tag("<yue-HK>"), "yue-HK");
  EXPECT_EQ(language_tag("<auto>"), "auto");
  for (const char* other : {"<unk>", "<en-us>", "<EN-US>", "<en-USA>", "<e-US>", "en-US", "<en_US>", "<>", "<de-D1>"})
    EXPECT_EQ(language_tag(other), "") << other;
  EXPECT_EQ(piece_text("<en-US>", false), "");
  EXPECT_EQ(piece_text("\xE2\x96\x81<fr-FR>", false), "");
  EXPECT_EQ(piece_text("<en-us>", false), "<en-us>");  // not a tag: the model's text
}

TEST(TransducerDecoder, F16InputsRoundAsGgmlDoes) {
  // An identity joint.enc stored as f16: its product is the input rounded to f16
  // (plus a zero bias, so -0 comes back as +0: equal as values).
  std::vector<float> x = {0.0f,           -0.0f,          1.0f,           65504.0f,
                          65519.0f,       65520.0f,       -70000.0f,      6.1035156e-05f,
                          5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 8.940697e-08f,
                          1.0009766f,     1.00048828125f, 1.00146484375f, std::numeric_limits<float>::infinity()};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
  std::normal_distribution<float> normal;
  while (x.size() < 4096) x.push_back(normal(rng) * std::exp2(exponent(rng)));
  const int n = static_cast<int>(x.size());
  DecoderWeights w;
  w.joint_enc = matrix(1, 1, {1.0f});
  w.joint_enc.f16_input = true;
  w.joint_enc_bias = {0.0f};
  Decoder d(&w);
  const std::vector<float> got = d.project_encoder(x, n);
  for (int i = 0; i < n; ++i) {
    const float want = ggml_fp16_to_fp32(ggml_fp32_to_fp16(x[i]));
    EXPECT_EQ(got[i], want) << "x = " << x[i];
  }
}

// A matrix kept as the file's blocks multiplies as ggml does: the vector
// converted to the type's dot-product type (f16; Q8_0 blocks of 32 with one
// scale), the products summed in f32. Checked against that arithmetic in double.
TEST(TransducerDecoder, StoredBlocksMultiplyTheVectorConvertedAsGgmlConvertsIt) {
  const int rows = 37, cols = 96;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> w(static_cast<size_t>(rows) * cols), x(cols), bias(rows);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  for (ggml_type type : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    const auto* traits = ggml_get_type_traits(type);
    Matrix m = matrix(rows, cols, {});
    m.type = type;
    m.blocks.resize(ggml_row_size(type, cols) * rows);
    ggml_quantize_chunk(type, w.data(), m.blocks.data(), 0, rows, cols, nullptr);
    m.data.resize(w.size());
    traits->to_float(m.blocks.data(), m.data.data(), static_cast<int64_t>(w.size()));
    // The vector as ggml converts it for this type's dot product.
    std::vector<uint8_t> xq(ggml_row_size(type, cols));
    ggml_quantize_chunk(type, x.data(), xq.data(), 0, 1, cols, nullptr);
    std::vector<float> xc(cols);
    traits->to_float(xq.data(), xc.data(), cols);
    DecoderWeights dw;
    dw.joint_enc = m;
    dw.joint_enc_bias = bias;
    Decoder d(&dw);
    const std::vector<float> got = d.project_encoder(x, 1);
    ASSERT_EQ(got.size(), static_cast<size_t>(rows));
    double max_err = 0;
    for (int r = 0; r < rows; ++r) {
      double want = bias[r], magnitude = std::abs(bias[r]);
      for (int c = 0; c < cols; ++c) {
        want += static_cast<double>(m.data[static_cast<size_t>(r) * cols + c]) * xc[c];
        magnitude += std::abs(static_cast<double>(m.data[static_cast<size_t>(r) * cols + c]) * xc[c]);
      }
      max_err = std::max(max_err, std::abs(got[r] - want) / magnitude);
    }
    // f32 sums of exact products; with x unconverted the error is 6e-5 (f16) and 2e-3 (Q8_0).
    EXPECT_LT(max_err, 1e-5);
  }
}

TEST(TransducerDecoder, PromptKernelTakesTheSlotsColumn) {
  // n_enc 2, 3 slots, hidden 2: hidden = relu(frame + column(slot)); out = hidden.
  DecoderWeights w;
  w.prompt.n_prompts = 3;
  w.prompt.w1 = matrix(2, 5, {1, 0, 10, 0, -10, 0, 1, 0, 20, 0});
  w.prompt.b1 = {0.5f, 0.0f};
  w.prompt.w2 = matrix(2, 2, {1, 0, 0, 1});
  w.prompt.b2 = {0.0f, -1.0f};
  Decoder d(&w);
  const std::vector<float> frames = {1, 2, -3, 4};
  EXPECT_EQ(d.apply_prompt(frames, 2, 0), (std::vector<float>{11.5f, 1.0f, 7.5f, 3.0f}));
  EXPECT_EQ(d.apply_prompt(frames, 2, 1), (std::vector<float>{1.5f, 21.0f, 0.0f, 23.0f}));
  EXPECT_EQ(d.apply_prompt(frames, 2, 2), (std::vector<float>{0.0f, 1.0f, 0.0f, 3.0f}));
}

}  // namespace
}  // namespace earshot::transducer

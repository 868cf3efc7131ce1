// The transducer half of a FastConformer model: an LSTM prediction network, the
// joint network and greedy decoding, TDT (token-and-duration) or plain RNN-T,
// on host float weights (the decoder runs one small matrix-vector product per
// step: a ggml graph per step would cost more in building than in computing).
// Model-neutral: any encoder whose output frames are n_enc wide feeds it.
#pragma once

#include <ggml.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/transducer_stream.h"

namespace earshot::transducer {

// Row-major [rows][cols] float matrix.
struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<float> data;
  // The file stored it as f16: ggml multiplies such a matrix by an f16-rounded
  // vector, and so does the decoder (the same products as ggml's, to the bit).
  bool f16_input = false;
  // The rows as the file stored them (f16 or a quantised type; empty: data is
  // multiplied), multiplied by ggml's own CPU dot product with the vector
  // converted to that type's dot-product type, as ggml's matrix product does it
  // for one column: a quarter (Q8_0) or half (F16) of f32's memory per step,
  // in the CPU's widest vectors.
  ggml_type type = GGML_TYPE_F32;
  std::vector<uint8_t> blocks;
  const float* row(int r) const { return data.data() + static_cast<size_t>(r) * cols; }
};

struct LstmLayer {
  Matrix w_ih;  // [4 * pred_dim][input]: gates packed i, f, o, c (whisper.cpp's order, reordered from PyTorch's i, f,
                // g, o)
  Matrix w_hh;  // [4 * pred_dim][pred_dim]
  std::vector<float> bias;  // [4 * pred_dim]: b_ih + b_hh folded
};

// A language prompt kernel (Nemotron 3.5): frame' = w2 relu(w1 [frame; one_hot(slot)] + b1) + b2.
struct PromptKernel {
  int n_prompts = 0;  // 0: none
  Matrix w1;          // [hidden][n_enc + n_prompts]
  std::vector<float> b1;
  Matrix w2;  // [n_enc][hidden]
  std::vector<float> b2;
};

struct DecoderWeights {
  int n_vocab = 0;  // pieces; blank is id n_vocab
  int pred_dim = 0;
  std::vector<int> durations;  // TDT durations in frames; empty: RNN-T (no duration outputs)
  int max_symbols = 10;        // per frame, before a forced advance
  Matrix embed;                // [n_vocab + 1][pred_dim]; the blank row starts the prediction net
  std::vector<LstmLayer> lstm;
  Matrix joint_pred;  // [joint][pred_dim]
  std::vector<float> joint_pred_bias;
  Matrix joint_enc;  // [joint][n_enc]
  std::vector<float> joint_enc_bias;
  Matrix joint_out;  // [n_vocab + 1 + durations][joint]
  std::vector<float> joint_out_bias;
  PromptKernel prompt;

  int blank() const { return n_vocab; }
  int n_outputs() const { return n_vocab + 1 + static_cast<int>(durations.size()); }
};

// One stream's prediction-network state: LSTM h and c per layer, and the joint
// projection of the last output. Copyable (a decoder can be rewound).
struct DecoderState {
  std::vector<std::vector<float>> h, c;
  std::vector<float> pred_proj;  // joint_pred * h_last + bias
  int last_token = -1;
  int boost = 0;  // the phrase boost's state (TokenBoost), carried from call to call; 0 = none under way
};

struct Emission {
  int token = 0;
  int frame = 0;     // encoder frame it was emitted at
  int duration = 0;  // frames it spans (TDT: the predicted duration; RNN-T: 1)
  int duration_index = -1;
  float log_prob = 0;        // log-softmax over the whole joint output (as libparakeet reports it)
  float token_log_prob = 0;  // log-softmax over pieces + blank only
};

struct GreedyStats {
  int steps = 0;      // joint evaluations
  int emissions = 0;  // non-blank ones
};

class Decoder {
 public:
  explicit Decoder(const DecoderWeights* weights) : w_(weights) {}

  // A fresh state: zero LSTM state advanced by the blank token (what both NeMo
  // and whisper.cpp start from; NeMo's blank embedding is its padding row).
  DecoderState initial_state() const;
  // Advances the prediction network by a token.
  void predict(DecoderState& state, int token) const;
  // joint_enc * frame + bias, for every frame of an encoder output [n_frames][n_enc].
  std::vector<float> project_encoder(std::span<const float> enc, int n_frames) const;
  // The prompt kernel over encoder frames [n_frames][n_enc] with one-hot slot
  // `slot` (the joint's input for a prompt model); the weights must have a prompt.
  std::vector<float> apply_prompt(std::span<const float> enc, int n_frames, int slot) const;
  // Raw joint logits for one projected frame (joint wide) and a state.
  void joint(std::span<const float> enc_proj, const DecoderState& state, std::vector<float>& logits) const;
  // Log-softmax of the whole joint output (libparakeet's normalisation).
  static void log_softmax(std::vector<float>& v);

  // Greedy decoding over projected frames [n_frames][joint], continuing from
  // state; appends emissions with frame numbers offset by frame_offset.
  // steer (optional, measurement only): takes each step's choice in place of the argmax.
  // boost (optional): each piece's logit gets the boost's score from state.boost
  // (and blank none) before the argmax; emissions keep the model's own log-probs.
  // Without a boost the choices are exactly the model's.
  GreedyStats greedy(std::span<const float> enc_proj, int n_frames, DecoderState& state, std::vector<Emission>& out,
                     int frame_offset = 0, TransducerSteer* steer = nullptr, const TokenBoost* boost = nullptr) const;

  // Beam search over the same frames (transducer_beam.cpp): `beam` hypotheses, each
  // with its own prediction-network state and frame (a TDT hypothesis skips by its
  // durations), scored by the sum of their choices' log-probabilities (pieces and
  // blank normalised together, plus the duration's for TDT) and the boost's scores;
  // hypotheses reaching the same frame with the same pieces merge (the better
  // kept). The best at the end (a match cut short by the end costs its bonus
  // back) gives the emissions and `state`. beam 1 is a greedy search in scores.
  GreedyStats beam(std::span<const float> enc_proj, int n_frames, DecoderState& state, std::vector<Emission>& out,
                   int beam, int frame_offset = 0, const TokenBoost* boost = nullptr) const;

  const DecoderWeights& weights() const { return *w_; }

 private:
  const DecoderWeights* w_;
};

// The boost's view of one greedy step: the argmax of `logits`' first n_tokens
// (pieces, then blank) with the boost's scores from `state` added (scratch: reused).
int boosted_argmax(const std::vector<float>& logits, int n_tokens, const TokenBoost& boost, int state,
                   std::vector<float>& scratch);
// The boost's state after `token` from `state`, and the score that token adds.
int boost_next(const TokenBoost& boost, int state, int token);
float boost_score(const TokenBoost& boost, int state, int token);

// SentencePiece pieces to text: "▁" is a space (dropped before the first word of
// a text), control pieces (<unk>, <s>, </s>, <pad>) and language tags are empty.
std::string piece_text(const std::string& piece, bool first_in_text);
bool piece_starts_word(const std::string& piece);
// A language tag piece as Nemotron 3.5 emits them ("<en-US>", "<auto>", with or
// without a leading "▁"): the locale inside ("en-US"); "" for any other piece.
std::string language_tag(const std::string& piece);

}  // namespace earshot::transducer

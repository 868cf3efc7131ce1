#include "model/transducer/decoder.h"

#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace earshot::transducer {
namespace {

// y = m x (+ bias) with ggml's CPU dot products: over the stored blocks with x
// converted to their dot-product type, else over the f32 rows (x rounded to f16
// first for a matrix the file stored as f16).
void matvec(const Matrix& m, const float* x_in, const float* bias, float* y) {
  static const bool cpu_ready = [] {
    ggml_cpu_init();
    return true;
  }();
  (void)cpu_ready;
  thread_local std::vector<float> rounded;
  thread_local std::vector<uint8_t> converted;
  const void* rows = m.data.data();
  size_t row_bytes = static_cast<size_t>(m.cols) * sizeof(float);
  const ggml_type_traits_cpu* dot = ggml_get_type_traits_cpu(GGML_TYPE_F32);
  const void* vec = x_in;
  if (!m.blocks.empty()) {
    dot = ggml_get_type_traits_cpu(m.type);
    rows = m.blocks.data();
    row_bytes = ggml_row_size(m.type, m.cols);
    converted.resize(ggml_row_size(dot->vec_dot_type, m.cols));
    ggml_get_type_traits_cpu(dot->vec_dot_type)->from_float(x_in, converted.data(), m.cols);
    vec = converted.data();
  } else if (m.f16_input) {
    rounded.resize(m.cols);
    for (int c = 0; c < m.cols; ++c) rounded[c] = ggml_fp16_to_fp32(ggml_fp32_to_fp16(x_in[c]));
    vec = rounded.data();
  }
  const auto* base = static_cast<const uint8_t*>(rows);
  for (int r = 0; r < m.rows; ++r) {
    float sum = 0;
    dot->vec_dot(m.cols, &sum, 0, base + static_cast<size_t>(r) * row_bytes, 0, vec, 0, 1);
    y[r] = sum + (bias ? bias[r] : 0.0f);
  }
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// log(sum(exp(v))) over [0, n), stable.
double log_sum_exp(const float* v, int n) {
  const float m = *std::max_element(v, v + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(v[i]) - m);
  return m + std::log(sum);
}

}  // namespace

int boosted_argmax(const std::vector<float>& logits, int n_tokens, const TokenBoost& boost, int state,
                   std::vector<float>& scratch) {
  // Pieces leaving a phrase get leave(state), those continuing one their arc's
  // score, blank (the last of n_tokens) nothing.
  const float leave = boost.leave(state);
  scratch.assign(logits.begin(), logits.begin() + n_tokens);
  for (int i = 0; i + 1 < n_tokens; ++i) scratch[i] += leave;
  for (const TokenBoost::Arc& arc : boost.arcs(state))
    if (arc.token >= 0 && arc.token + 1 < n_tokens) scratch[arc.token] = logits[arc.token] + arc.score;
  return argmax(scratch.data(), n_tokens);
}

int boost_next(const TokenBoost& boost, int state, int token) {
  const std::span<const TokenBoost::Arc> arcs = boost.arcs(state);
  const auto it =
      std::lower_bound(arcs.begin(), arcs.end(), token, [](const TokenBoost::Arc& a, int t) { return a.token < t; });
  return it != arcs.end() && it->token == token ? it->next : 0;
}

float boost_score(const TokenBoost& boost, int state, int token) {
  const std::span<const TokenBoost::Arc> arcs = boost.arcs(state);
  const auto it =
      std::lower_bound(arcs.begin(), arcs.end(), token, [](const TokenBoost::Arc& a, int t) { return a.token < t; });
  return it != arcs.end() && it->token == token ? it->score : boost.leave(state);
}

DecoderState Decoder::initial_state() const {
  DecoderState state;
  state.h.assign(w_->lstm.size(), std::vector<float>(w_->pred_dim, 0.0f));
  state.c = state.h;
  predict(state, w_->blank());
  return state;
}

void Decoder::predict(DecoderState& state, int token) const {
  const int d = w_->pred_dim;
  std::vector<float> x(w_->embed.row(token), w_->embed.row(token) + w_->embed.cols);
  std::vector<float> gates(4 * d), hidden(4 * d);
  for (size_t l = 0; l < w_->lstm.size(); ++l) {
    const LstmLayer& layer = w_->lstm[l];
    matvec(layer.w_ih, x.data(), nullptr, gates.data());
    matvec(layer.w_hh, state.h[l].data(), layer.bias.data(), hidden.data());
    std::vector<float>& h = state.h[l];
    std::vector<float>& c = state.c[l];
    for (int i = 0; i < d; ++i) {
      const float in = sigmoid(gates[i] + hidden[i]);
      const float forget = sigmoid(gates[d + i] + hidden[d + i]);
      const float out = sigmoid(gates[2 * d + i] + hidden[2 * d + i]);
      const float cell = std::tanh(gates[3 * d + i] + hidden[3 * d + i]);
      c[i] = forget * c[i] + in * cell;
      h[i] = out * std::tanh(c[i]);
    }
    x = h;
  }
  state.pred_proj.resize(w_->joint_pred.rows);
  matvec(w_->joint_pred, x.data(), w_->joint_pred_bias.data(), state.pred_proj.data());
  state.last_token = token;
}

std::vector<float> Decoder::project_encoder(std::span<const float> enc, int n_frames) const {
  const int n_joint = w_->joint_enc.rows, n_enc = w_->joint_enc.cols;
  std::vector<float> out(static_cast<size_t>(n_frames) * n_joint);
  for (int t = 0; t < n_frames; ++t)
    matvec(w_->joint_enc, enc.data() + static_cast<size_t>(t) * n_enc, w_->joint_enc_bias.data(),
           out.data() + static_cast<size_t>(t) * n_joint);
  return out;
}

std::vector<float> Decoder::apply_prompt(std::span<const float> enc, int n_frames, int slot) const {
  const PromptKernel& k = w_->prompt;
  const int n_enc = k.w2.rows, n_hidden = k.w1.rows;
  std::vector<float> in(static_cast<size_t>(n_enc + k.n_prompts), 0.0f), hidden(n_hidden);
  std::vector<float> out(static_cast<size_t>(n_frames) * n_enc);
  in[n_enc + slot] = 1.0f;
  for (int t = 0; t < n_frames; ++t) {
    std::copy_n(enc.data() + static_cast<size_t>(t) * n_enc, n_enc, in.begin());
    matvec(k.w1, in.data(), k.b1.data(), hidden.data());
    for (float& h : hidden) h = std::max(0.0f, h);
    matvec(k.w2, hidden.data(), k.b2.data(), out.data() + static_cast<size_t>(t) * n_enc);
  }
  return out;
}

void Decoder::joint(std::span<const float> enc_proj, const DecoderState& state, std::vector<float>& logits) const {
  const int n_joint = w_->joint_out.cols;
  std::vector<float> hidden(n_joint);
  for (int i = 0; i < n_joint; ++i) hidden[i] = std::max(0.0f, enc_proj[i] + state.pred_proj[i]);
  logits.resize(w_->joint_out.rows);
  matvec(w_->joint_out, hidden.data(), w_->joint_out_bias.data(), logits.data());
}

void Decoder::log_softmax(std::vector<float>& v) {
  const double lse = log_sum_exp(v.data(), static_cast<int>(v.size()));
  for (float& x : v) x = static_cast<float>(x - lse);
}

GreedyStats Decoder::greedy(std::span<const float> enc_proj, int n_frames, DecoderState& state,
                            std::vector<Emission>& out, int frame_offset, TransducerSteer* steer,
                            const TokenBoost* boost) const {
  const int n_joint = w_->joint_enc.rows;
  const int n_tokens = w_->n_vocab + 1;  // pieces and blank
  const bool tdt = !w_->durations.empty();
  GreedyStats stats;
  std::vector<float> logits, boosted;
  int t = 0, symbols = 0;
  while (t < n_frames) {
    joint(enc_proj.subspan(static_cast<size_t>(t) * n_joint, n_joint), state, logits);
    ++stats.steps;
    int token = 0, duration_index = -1, duration = 1;
    if (steer) {
      const TransducerSteer::Choice c = steer->choose(frame_offset + t);
      token = c.token;
      if (tdt) duration_index = c.duration_index;
      if (token < 0 || token >= n_tokens ||
          (tdt && (duration_index < 0 || duration_index >= static_cast<int>(w_->durations.size()))))
        throw Error(ErrorCode::kInternal, "transducer steer chose an output the model does not have");
    } else if (boost) {
      token = boosted_argmax(logits, n_tokens, *boost, state.boost, boosted);
      if (tdt) duration_index = argmax(logits.data() + n_tokens, static_cast<int>(w_->durations.size()));
    } else {
      token = argmax(logits.data(), n_tokens);
      if (tdt) duration_index = argmax(logits.data() + n_tokens, static_cast<int>(w_->durations.size()));
    }
    if (tdt) duration = w_->durations[duration_index];
    if (token == w_->blank()) {
      // A blank always moves on: a zero duration on blank would loop forever.
      t += tdt ? std::max(duration, 1) : 1;
      symbols = 0;
      continue;
    }
    Emission e;
    e.token = token;
    e.frame = frame_offset + t;
    e.duration = duration;
    e.duration_index = duration_index;
    e.log_prob = static_cast<float>(logits[token] - log_sum_exp(logits.data(), static_cast<int>(logits.size())));
    e.token_log_prob = static_cast<float>(logits[token] - log_sum_exp(logits.data(), n_tokens));
    out.push_back(e);
    ++stats.emissions;
    if (boost) state.boost = boost_next(*boost, state.boost, token);
    predict(state, token);
    if (tdt && duration > 0) {
      t += duration;
      symbols = 0;
    } else if (++symbols >= w_->max_symbols) {
      t += 1;  // the per-frame bound: force the frame to end
      symbols = 0;
    }
  }
  return stats;
}

namespace {
const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary
bool is_control(const std::string& p) { return p == "<unk>" || p == "<s>" || p == "</s>" || p == "<pad>"; }
}  // namespace

std::string piece_text(const std::string& piece, bool first_in_text) {
  if (is_control(piece) || !language_tag(piece).empty()) return "";
  std::string text;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      if (!first_in_text || !text.empty()) text += ' ';
      i += kSpace.size();
    } else {
      text += piece[i++];
    }
  }
  return text;
}

bool piece_starts_word(const std::string& piece) { return piece.starts_with(kSpace); }

std::string language_tag(const std::string& piece) {
  const std::string p = piece.starts_with(kSpace) ? piece.substr(kSpace.size()) : piece;
  if (p.size() < 3 || p.front() != '<' || p.back() != '>') return "";
  const std::string inner = p.substr(1, p.size() - 2);
  if (inner == "auto") return inner;
  // xx-XX or xxx-XX: a lower-case language, a hyphen, an upper-case region.
  const size_t dash = inner.find('-');
  if (dash != 2 && dash != 3) return "";
  if (inner.size() != dash + 3) return "";
  for (size_t i = 0; i < inner.size(); ++i) {
    const char c = inner[i];
    const bool ok = i < dash ? (c >= 'a' && c <= 'z') : i == dash ? c == '-' : (c >= 'A' && c <= 'Z');
    if (!ok) return "";
  }
  return inner;
}

}  // namespace earshot::transducer

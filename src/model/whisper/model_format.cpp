#include "model/whisper/model_format.h"

#include <string>

#include "common/error.h"

namespace earshot::whisper {
namespace {

struct FtypeEntry {
  int32_t ftype;
  ggml_type type;
  std::string_view name;
};

// ggml_ftype values (GGML_FTYPE_ALL_F32, GGML_FTYPE_MOSTLY_*) of the types the format uses.
constexpr FtypeEntry kFtypes[] = {
    {0, GGML_TYPE_F32, "f32"},   {1, GGML_TYPE_F16, "f16"},   {2, GGML_TYPE_Q4_0, "q4_0"}, {3, GGML_TYPE_Q4_1, "q4_1"},
    {7, GGML_TYPE_Q8_0, "q8_0"}, {8, GGML_TYPE_Q5_0, "q5_0"}, {9, GGML_TYPE_Q5_1, "q5_1"},
};

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, "invalid Whisper model header: " + message);
}

void check_range(const char* name, int32_t value, int32_t lo, int32_t hi) {
  if (value < lo || value > hi) {
    invalid(std::string(name) + " = " + std::to_string(value) + " is outside the plausible range [" +
            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
}

}  // namespace

std::optional<ggml_type> weight_type_of_ftype(int32_t ftype) {
  for (const auto& entry : kFtypes) {
    if (entry.ftype == ftype) return entry.type;
  }
  return std::nullopt;
}

int32_t ftype_of_weight_type(ggml_type type) {
  for (const auto& entry : kFtypes) {
    if (entry.type == type) return entry.ftype;
  }
  return -1;
}

std::string_view type_name(ggml_type type) {
  if (type < 0 || type >= GGML_TYPE_COUNT) return "unknown";
  const char* name = ggml_type_name(type);
  return name != nullptr ? name : "unknown";
}

std::optional<ggml_type> parse_weight_type(std::string_view name) {
  for (const auto& entry : kFtypes) {
    if (entry.name == name) return entry.type;
  }
  return std::nullopt;
}

void validate_hparams(const Hparams& h) {
  if (h.n_vocab != 51864 && h.n_vocab != 51865 && h.n_vocab != 51866) {
    invalid("n_vocab = " + std::to_string(h.n_vocab) +
            " is not a Whisper vocabulary size (51864 English-only, 51865 multilingual, 51866 large-v3)");
  }
  check_range("n_audio_ctx", h.n_audio_ctx, 1, kMaxAudioCtx);
  check_range("n_audio_state", h.n_audio_state, 1, kMaxState);
  check_range("n_audio_head", h.n_audio_head, 1, h.n_audio_state);
  check_range("n_audio_layer", h.n_audio_layer, 1, kMaxLayers);
  check_range("n_text_ctx", h.n_text_ctx, 1, kMaxTextCtx);
  check_range("n_text_state", h.n_text_state, 1, kMaxState);
  check_range("n_text_head", h.n_text_head, 1, h.n_text_state);
  check_range("n_text_layer", h.n_text_layer, 1, kMaxLayers);
  if (h.n_audio_state % h.n_audio_head != 0) {
    invalid("n_audio_head = " + std::to_string(h.n_audio_head) +
            " does not divide n_audio_state = " + std::to_string(h.n_audio_state));
  }
  if (h.n_text_state % h.n_text_head != 0) {
    invalid("n_text_head = " + std::to_string(h.n_text_head) +
            " does not divide n_text_state = " + std::to_string(h.n_text_state));
  }
  // The decoder's cross-attention reads encoder states directly: Whisper has one width.
  if (h.n_audio_state != h.n_text_state) {
    invalid("n_audio_state = " + std::to_string(h.n_audio_state) +
            " differs from n_text_state = " + std::to_string(h.n_text_state) + " (Whisper uses one width for both)");
  }
  if (h.n_mels != 80 && h.n_mels != 128) {
    invalid("n_mels = " + std::to_string(h.n_mels) + " (Whisper models use 80 or 128 mel bins)");
  }
  const auto type = weight_type_of_ftype(h.ftype);
  if (!type) {
    invalid("ftype = " + std::to_string(h.ftype) +
            " is not a supported weight type (0 f32, 1 f16, 2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1)");
  }
  if (ggml_is_quantized(*type)) {
    if (h.quantization_version != GGML_QNT_VERSION) {
      invalid("quantisation version " + std::to_string(h.quantization_version) + " of " +
              std::string(type_name(*type)) + " weights is not supported (this build reads version " +
              std::to_string(GGML_QNT_VERSION) + "); re-quantise the model with a current whisper.cpp");
    }
    const int64_t block = ggml_blck_size(*type);
    if (h.n_text_state % block != 0) {
      invalid("n_text_state = " + std::to_string(h.n_text_state) + " is not a multiple of the " +
              std::string(type_name(*type)) + " block size " + std::to_string(block));
    }
  } else if (h.quantization_version < 0 || h.quantization_version > GGML_QNT_VERSION) {
    invalid("quantisation version " + std::to_string(h.quantization_version) + " is unknown");
  }
}

std::vector<TensorSpec> model_tensor_specs(const Hparams& h, ggml_type wtype) {
  const ggml_type conv_type = wtype == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
  const int64_t n_state = h.n_audio_state;
  const int64_t n_text = h.n_text_state;
  std::vector<TensorSpec> specs;
  specs.reserve(10 + 15 * h.n_audio_layer + 24 * h.n_text_layer);

  auto add = [&](std::string name, std::initializer_list<int64_t> ne, ggml_type type, TensorRole role, int layer,
                 bool encoder, TensorInit init) {
    TensorSpec spec;
    spec.name = std::move(name);
    spec.n_dims = static_cast<int>(ne.size());
    int i = 0;
    for (int64_t n : ne) spec.ne[i++] = n;
    spec.type = type;
    spec.role = role;
    spec.layer = layer;
    spec.encoder = encoder;
    spec.init = init;
    specs.push_back(std::move(spec));
  };
  using R = TensorRole;
  using I = TensorInit;
  const auto F32 = GGML_TYPE_F32;

  add("encoder.positional_embedding", {n_state, h.n_audio_ctx}, F32, R::kEncPos, -1, true, I::kPositional);
  add("encoder.conv1.weight", {3, h.n_mels, n_state}, conv_type, R::kConv1W, -1, true, I::kMatrix);
  add("encoder.conv1.bias", {1, n_state}, F32, R::kConv1B, -1, true, I::kBias);
  add("encoder.conv2.weight", {3, n_state, n_state}, conv_type, R::kConv2W, -1, true, I::kMatrix);
  add("encoder.conv2.bias", {1, n_state}, F32, R::kConv2B, -1, true, I::kBias);

  // One attention block (self or cross) in state-dict order: query, key, value, out, then its LayerNorm.
  auto add_attention = [&](const std::string& prefix, const std::string& ln, int64_t n, int layer, bool encoder,
                           bool cross) {
    add(prefix + ".query.weight", {n, n}, wtype, cross ? R::kCrossQW : R::kAttnQW, layer, encoder, I::kMatrix);
    add(prefix + ".query.bias", {n}, F32, cross ? R::kCrossQB : R::kAttnQB, layer, encoder, I::kBias);
    add(prefix + ".key.weight", {n, n}, wtype, cross ? R::kCrossKW : R::kAttnKW, layer, encoder, I::kMatrix);
    add(prefix + ".value.weight", {n, n}, wtype, cross ? R::kCrossVW : R::kAttnVW, layer, encoder, I::kMatrix);
    add(prefix + ".value.bias", {n}, F32, cross ? R::kCrossVB : R::kAttnVB, layer, encoder, I::kBias);
    add(prefix + ".out.weight", {n, n}, wtype, cross ? R::kCrossOutW : R::kAttnOutW, layer, encoder, I::kMatrix);
    add(prefix + ".out.bias", {n}, F32, cross ? R::kCrossOutB : R::kAttnOutB, layer, encoder, I::kBias);
    add(ln + ".weight", {n}, F32, cross ? R::kCrossLnW : R::kAttnLnW, layer, encoder, I::kLayerNormWeight);
    add(ln + ".bias", {n}, F32, cross ? R::kCrossLnB : R::kAttnLnB, layer, encoder, I::kLayerNormBias);
  };
  auto add_mlp = [&](const std::string& block, int64_t n, int layer, bool encoder) {
    add(block + ".mlp.0.weight", {n, 4 * n}, wtype, R::kMlp0W, layer, encoder, I::kMatrix);
    add(block + ".mlp.0.bias", {4 * n}, F32, R::kMlp0B, layer, encoder, I::kBias);
    add(block + ".mlp.2.weight", {4 * n, n}, wtype, R::kMlp1W, layer, encoder, I::kMatrix);
    add(block + ".mlp.2.bias", {n}, F32, R::kMlp1B, layer, encoder, I::kBias);
    add(block + ".mlp_ln.weight", {n}, F32, R::kMlpLnW, layer, encoder, I::kLayerNormWeight);
    add(block + ".mlp_ln.bias", {n}, F32, R::kMlpLnB, layer, encoder, I::kLayerNormBias);
  };

  for (int i = 0; i < h.n_audio_layer; ++i) {
    const std::string block = "encoder.blocks." + std::to_string(i);
    add_attention(block + ".attn", block + ".attn_ln", n_state, i, true, false);
    add_mlp(block, n_state, i, true);
  }
  add("encoder.ln_post.weight", {n_state}, F32, R::kEncLnW, -1, true, I::kLayerNormWeight);
  add("encoder.ln_post.bias", {n_state}, F32, R::kEncLnB, -1, true, I::kLayerNormBias);

  add("decoder.positional_embedding", {n_text, h.n_text_ctx}, F32, R::kDecPos, -1, false, I::kPositional);
  add("decoder.token_embedding.weight", {n_text, h.n_vocab}, wtype, R::kTokenEmb, -1, false, I::kEmbedding);
  for (int i = 0; i < h.n_text_layer; ++i) {
    const std::string block = "decoder.blocks." + std::to_string(i);
    add_attention(block + ".attn", block + ".attn_ln", n_text, i, false, false);
    add_attention(block + ".cross_attn", block + ".cross_attn_ln", n_text, i, false, true);
    add_mlp(block, n_text, i, false);
  }
  add("decoder.ln.weight", {n_text}, F32, R::kDecLnW, -1, false, I::kLayerNormWeight);
  add("decoder.ln.bias", {n_text}, F32, R::kDecLnB, -1, false, I::kLayerNormBias);
  return specs;
}

}  // namespace earshot::whisper

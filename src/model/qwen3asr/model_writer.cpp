#include "model/qwen3asr/model_writer.h"

#include <gguf.h>
#include <llama.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/qwen3asr/model.h"
#include "model/runtime/gguf_file.h"

namespace earshot::qwen3asr {

PairDims PairDims::real_0_6b() {
  PairDims d;
  d.text = {.n_embd = 1024,
            .n_layer = 28,
            .n_head = 16,
            .n_head_kv = 8,
            .head_dim = 128,
            .n_ff = 3072,
            .n_ctx = 65536,
            .rope_theta = 1e6f,
            .rms_eps = 1e-6f,
            .rope_sections = {24, 20, 20, 0}};
  d.audio = {
      .n_embd = 896, .n_layer = 18, .n_head = 14, .n_ff = 3584, .conv_channels = 480, .n_mel = 128, .ln_eps = 1e-5f};
  return d;
}

PairDims PairDims::real_1_7b() {
  PairDims d;
  d.text = {.n_embd = 2048,
            .n_layer = 28,
            .n_head = 16,
            .n_head_kv = 8,
            .head_dim = 128,
            .n_ff = 6144,
            .n_ctx = 65536,
            .rope_theta = 1e6f,
            .rms_eps = 1e-6f,
            .rope_sections = {24, 20, 20, 0}};
  d.audio = {
      .n_embd = 1024, .n_layer = 24, .n_head = 16, .n_ff = 4096, .conv_channels = 480, .n_mel = 128, .ln_eps = 1e-5f};
  return d;
}

namespace {

using runtime::GgufFile;
using runtime::GgufWriter;
using runtime::MetaType;

constexpr float kBranchGain = 4.0f;

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  // Scaled initialisation (std 1/sqrt(fan_in)) so activations keep their size through the layers.
  std::vector<float> normal(size_t n, float std) {
    std::normal_distribution<float> dist(0.0f, std);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

 private:
  std::mt19937 rng_;
};

struct Tensors {
  GgufWriter& out;
  Random& random;
  ggml_type type = GGML_TYPE_F16;  // of the matrices
  void matrix(const std::string& name, std::vector<int64_t> ne, float gain = 1.0f) {
    size_t n = 1;
    for (int64_t x : ne) n *= static_cast<size_t>(x);
    const int64_t fan_in = ne.size() == 4 ? ne[0] * ne[1] * ne[2] : ne[0];
    out.add_tensor_f32(name, type, ne, random.normal(n, gain / std::sqrt(static_cast<float>(fan_in))));
  }
  void constant(const std::string& name, std::vector<int64_t> ne, float value) {
    size_t n = 1;
    for (int64_t x : ne) n *= static_cast<size_t>(x);
    out.add_tensor_f32(name, GGML_TYPE_F32, ne, std::vector<float>(n, value));
  }
  void small(const std::string& name, std::vector<int64_t> ne, float std) {
    size_t n = 1;
    for (int64_t x : ne) n *= static_cast<size_t>(x);
    out.add_tensor_f32(name, GGML_TYPE_F32, ne, random.normal(n, std));
  }
};

template <typename T>
bool copy_array(const GgufFile& from, const std::string& key, GgufWriter& to) {
  try {
    if (auto v = from.find_array<T>(key)) {
      to.set_array<T>(key, std::span<const T>(*v));
      return true;
    }
  } catch (const Error&) {
    // another element type: the caller tries the next
  }
  return false;
}

// The tokenizer keys of the Qwen2 vocabulary, with Qwen3-ASR's added tokens at their ids.
void graft_vocabulary(const std::filesystem::path& path, GgufWriter& out) {
  const GgufFile vocab = GgufFile::open(path);
  std::vector<std::string> tokens = vocab.get_array<std::string>("tokenizer.ggml.tokens");
  std::vector<int32_t> types = vocab.get_array<int32_t>("tokenizer.ggml.token_type");
  if (tokens.size() != static_cast<size_t>(kVocabSize) || types.size() != tokens.size()) {
    throw Error(ErrorCode::kInvalidModel, vocab.label() + ": not the Qwen2 vocabulary (" +
                                              std::to_string(tokens.size()) + " tokens, expected " +
                                              std::to_string(kVocabSize) + ")");
  }
  for (const std::string& key : vocab.keys()) {
    if (key.rfind("tokenizer.", 0) != 0 || key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.token_type") {
      continue;
    }
    switch (*vocab.key_type(key)) {
      case MetaType::kString: out.set(key, vocab.get<std::string>(key)); break;
      case MetaType::kU32: out.set(key, vocab.get<uint32_t>(key)); break;
      case MetaType::kI32: out.set(key, vocab.get<int32_t>(key)); break;
      case MetaType::kBool: out.set(key, vocab.get<bool>(key)); break;
      case MetaType::kF32: out.set(key, vocab.get<float>(key)); break;
      case MetaType::kArray:
        if (!copy_array<std::string>(vocab, key, out) && !copy_array<int32_t>(vocab, key, out) &&
            !copy_array<float>(vocab, key, out)) {
          throw Error(ErrorCode::kInvalidModel, vocab.label() + ": unexpected array type at " + key);
        }
        break;
      default: throw Error(ErrorCode::kInvalidModel, vocab.label() + ": unexpected value type at " + key);
    }
  }
  // Qwen2's vocabulary holds padding entries where Qwen3-ASR added these.
  constexpr int32_t kControl = 3, kUserDefined = 4;
  const struct {
    int32_t id;
    const char* text;
    int32_t type;
  } added[] = {{kAudioStart, "<|audio_start|>", kControl},
               {kAudioEnd, "<|audio_end|>", kControl},
               {kAudioPad, "<|audio_pad|>", kControl},
               // Rendered in the decoded text: the seed splits "language X<asr_text>..." on it.
               {kAsrText, "<asr_text>", kUserDefined}};
  for (const auto& a : added) {
    tokens[static_cast<size_t>(a.id)] = a.text;
    types[static_cast<size_t>(a.id)] = a.type;
  }
  out.set_array<std::string>("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  out.set_array<int32_t>("tokenizer.ggml.token_type", std::span<const int32_t>(types));
  // As convert_hf_to_gguf.py writes Qwen3-ASR: BOS and EOS are <|im_end|>.
  out.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(kImEnd));
  out.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(kImEnd));
  out.set("tokenizer.chat_template",
          std::string("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
                      "}}{% endif %}"));
}

void write_text(const TextDims& d, const std::filesystem::path& vocab, const std::filesystem::path& path,
                Random& random, ggml_type type) {
  GgufWriter out;
  const std::string a = "qwen3vl";
  out.set_architecture(a);
  out.set("general.name", std::string("earshot random Qwen3-ASR text model"));
  out.set("general.file_type", static_cast<uint32_t>(type == GGML_TYPE_F32 ? 0 : 1));  // all f32 / mostly f16
  out.set(a + ".context_length", d.n_ctx);
  out.set(a + ".embedding_length", d.n_embd);
  out.set(a + ".block_count", d.n_layer);
  out.set(a + ".feed_forward_length", d.n_ff);
  out.set(a + ".attention.head_count", d.n_head);
  out.set(a + ".attention.head_count_kv", d.n_head_kv);
  out.set(a + ".attention.key_length", d.head_dim);
  out.set(a + ".attention.value_length", d.head_dim);
  out.set(a + ".attention.layer_norm_rms_epsilon", d.rms_eps);
  out.set(a + ".rope.freq_base", d.rope_theta);
  out.set_array<int32_t>(a + ".rope.dimension_sections", std::span<const int32_t>(d.rope_sections));
  out.set(a + ".n_deepstack_layers", static_cast<uint32_t>(0));
  graft_vocabulary(vocab, out);

  Tensors t{out, random, type};
  const int64_t e = d.n_embd, q = int64_t{d.n_head} * d.head_dim, kv = int64_t{d.n_head_kv} * d.head_dim;
  // Tied head: logits = h . E, so E's scale sets the logits' spread.
  t.matrix("token_embd.weight", {e, kVocabSize});
  t.constant("output_norm.weight", {e}, 1.0f);
  for (uint32_t l = 0; l < d.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.constant(b + "attn_norm.weight", {e}, 1.0f);
    t.matrix(b + "attn_q.weight", {e, q});
    t.matrix(b + "attn_k.weight", {e, kv});
    t.matrix(b + "attn_v.weight", {e, kv});
    // The residual branches outweigh the token's own embedding: with a tied head
    // a random model otherwise predicts the token it was given, again and again.
    t.matrix(b + "attn_output.weight", {q, e}, kBranchGain);
    t.constant(b + "attn_q_norm.weight", {d.head_dim}, 1.0f);
    t.constant(b + "attn_k_norm.weight", {d.head_dim}, 1.0f);
    t.constant(b + "ffn_norm.weight", {e}, 1.0f);
    t.matrix(b + "ffn_gate.weight", {e, d.n_ff});
    t.matrix(b + "ffn_up.weight", {e, d.n_ff});
    t.matrix(b + "ffn_down.weight", {d.n_ff, e}, kBranchGain);
  }
  out.write(path);
}

void write_mmproj(const AudioDims& d, uint32_t text_embd, const std::filesystem::path& path, Random& random,
                  ggml_type type) {
  GgufWriter out;
  out.set_architecture("clip");
  out.set("general.name", std::string("earshot random Qwen3-ASR audio encoder"));
  out.set("general.file_type", static_cast<uint32_t>(type == GGML_TYPE_F32 ? 0 : 1));
  out.set("clip.has_audio_encoder", true);
  out.set("clip.audio.projector_type", std::string("qwen3a"));
  out.set("clip.audio.projection_dim", text_embd);
  out.set("clip.audio.embedding_length", d.n_embd);
  out.set("clip.audio.feed_forward_length", d.n_ff);
  out.set("clip.audio.block_count", d.n_layer);
  out.set("clip.audio.attention.head_count", d.n_head);
  out.set("clip.audio.num_mel_bins", d.n_mel);
  out.set("clip.audio.attention.layer_norm_epsilon", d.ln_eps);

  Tensors t{out, random, type};
  const int64_t c = d.conv_channels, e = d.n_embd;
  // Conv weights are f16 (the converter forces it; f32 with f32_weights); biases [1, 1, C] as it reshapes them.
  t.matrix("a.conv2d.1.weight", {3, 3, 1, c});
  t.small("a.conv2d.1.bias", {1, 1, c}, 0.02f);
  t.matrix("a.conv2d.2.weight", {3, 3, c, c});
  t.small("a.conv2d.2.bias", {1, 1, c}, 0.02f);
  t.matrix("a.conv2d.3.weight", {3, 3, c, c});
  t.small("a.conv2d.3.bias", {1, 1, c}, 0.02f);
  const int64_t freq = (d.n_mel + 7) / 8;  // three stride-2 convs over the mel axis
  t.matrix("a.conv_out.weight", {c * freq, e});
  // The converter generates the sinusoidal table (1500 positions, sin half then cos half).
  {
    const int64_t length = 1500, half = e / 2;
    std::vector<float> table(static_cast<size_t>(length * e));
    const double step = std::log(10000.0) / static_cast<double>(half - 1);
    for (int64_t p = 0; p < length; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * std::exp(-step * static_cast<double>(i));
        table[static_cast<size_t>(p * e + i)] = static_cast<float>(std::sin(angle));
        table[static_cast<size_t>(p * e + half + i)] = static_cast<float>(std::cos(angle));
      }
    }
    out.add_tensor_f32("a.position_embd.weight", GGML_TYPE_F32, std::vector<int64_t>{e, length}, table);
  }
  for (uint32_t l = 0; l < d.n_layer; ++l) {
    const std::string b = "a.blk." + std::to_string(l) + ".";
    for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      t.matrix(b + w + ".weight", {e, e});
      t.small(b + w + ".bias", {e}, 0.02f);
    }
    t.constant(b + "ln1.weight", {e}, 1.0f);
    t.constant(b + "ln1.bias", {e}, 0.0f);
    t.constant(b + "ln2.weight", {e}, 1.0f);
    t.constant(b + "ln2.bias", {e}, 0.0f);
    t.matrix(b + "ffn_up.weight", {e, d.n_ff});
    t.small(b + "ffn_up.bias", {d.n_ff}, 0.02f);
    t.matrix(b + "ffn_down.weight", {d.n_ff, e});
    t.small(b + "ffn_down.bias", {e}, 0.02f);
  }
  t.constant("a.post_ln.weight", {e}, 1.0f);
  t.constant("a.post_ln.bias", {e}, 0.0f);
  t.matrix("mm.a.mlp.1.weight", {e, e});
  t.small("mm.a.mlp.1.bias", {e}, 0.02f);
  t.matrix("mm.a.mlp.2.weight", {e, text_embd});
  t.small("mm.a.mlp.2.bias", {text_embd}, 0.02f);
  out.write(path);
}

}  // namespace

WrittenPair write_random_pair(const PairDims& dims, const std::filesystem::path& vocab,
                              const std::filesystem::path& out_prefix, uint32_t seed) {
  if (dims.text.rope_sections[0] + dims.text.rope_sections[1] + dims.text.rope_sections[2] +
          dims.text.rope_sections[3] !=
      static_cast<int32_t>(dims.text.head_dim / 2)) {
    throw Error(ErrorCode::kInvalidArgument, "rope sections must sum to head_dim / 2");
  }
  Random random(seed);
  WrittenPair pair{out_prefix.string() + ".gguf", out_prefix.string() + "-mmproj.gguf"};
  const ggml_type type = dims.f32_weights ? GGML_TYPE_F32 : GGML_TYPE_F16;
  write_text(dims.text, vocab, pair.text, random, type);
  write_mmproj(dims.audio, dims.text.n_embd, pair.mmproj, random, type);
  return pair;
}

void quantize_text_model(const std::filesystem::path& text, ggml_type type) {
  const std::filesystem::path tmp = text.string() + ".quantising";
  quantize_text_model(text, tmp, type);
  std::filesystem::rename(tmp, text);
}

void quantize_text_model(const std::filesystem::path& in, const std::filesystem::path& out, ggml_type type) {
  llama_ftype ftype;
  if (type == GGML_TYPE_Q8_0) {
    ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
  } else if (type == GGML_TYPE_Q4_0) {
    ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("a Qwen3-ASR text model is quantised to q8_0 or q4_0, not ") + ggml_type_name(type));
  }
  detail::init_backend();
  llama_model_quantize_params params = llama_model_quantize_default_params();
  params.ftype = ftype;
  const uint32_t status = llama_model_quantize(in.c_str(), out.c_str(), &params);
  if (status != 0) {
    std::error_code ignored;
    std::filesystem::remove(out, ignored);
    throw Error(ErrorCode::kIo, "libllama could not quantise " + in.string() + " to " + ggml_type_name(type));
  }
}

void quantize_mmproj(const std::filesystem::path& mmproj, ggml_type type) {
  const std::filesystem::path tmp = mmproj.string() + ".quantising";
  quantize_mmproj(mmproj, tmp, type);
  std::filesystem::rename(tmp, mmproj);
}

void quantize_mmproj(const std::filesystem::path& mmproj, const std::filesystem::path& out_path, ggml_type type) {
  if (type != GGML_TYPE_Q8_0) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("a Qwen3-ASR mmproj is quantised to q8_0 (as convert_hf_to_gguf.py writes it), not ") +
                    ggml_type_name(type));
  }
  struct Free {
    void operator()(gguf_context* c) const { gguf_free(c); }
    void operator()(ggml_context* c) const { ggml_free(c); }
  };
  ggml_context* raw = nullptr;
  std::unique_ptr<gguf_context, Free> in(gguf_init_from_file(mmproj.c_str(), {false, &raw}));
  std::unique_ptr<ggml_context, Free> data(raw);
  if (!in) throw Error(ErrorCode::kIo, "cannot read " + mmproj.string() + " as GGUF");
  const int64_t n = gguf_get_n_tensors(in.get());
  std::unique_ptr<gguf_context, Free> out(gguf_init_empty());
  gguf_set_kv(out.get(), in.get());
  gguf_set_val_u32(out.get(), "general.file_type", static_cast<uint32_t>(LLAMA_FTYPE_MOSTLY_Q8_0));
  gguf_set_val_u32(out.get(), "general.quantization_version", GGML_QNT_VERSION);
  std::unique_ptr<ggml_context, Free> meta(
      ggml_init({static_cast<size_t>(n + 1) * ggml_tensor_overhead(), nullptr, true}));
  std::deque<std::vector<uint8_t>> buffers;
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = gguf_get_tensor_name(in.get(), i);
    const ggml_tensor* t = ggml_get_tensor(data.get(), name.c_str());
    // The matrices of the blocks and the projector (the stem's convs and conv_out:
    // ".conv" weights, forced to F16 by the converter, as are 1-D and positions to F32).
    const bool matrix = ggml_n_dims(t) == 2 && name.ends_with(".weight") &&
                        (name.starts_with("a.blk.") || name.starts_with("mm.a.")) &&
                        t->ne[0] % ggml_blck_size(type) == 0;
    ggml_tensor* o = ggml_new_tensor(meta.get(), matrix ? type : t->type, GGML_MAX_DIMS, t->ne);
    ggml_set_name(o, name.c_str());
    gguf_add_tensor(out.get(), o);
    if (!matrix) {
      gguf_set_tensor_data(out.get(), name.c_str(), t->data);
      continue;
    }
    if (t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_F32) {
      throw Error(ErrorCode::kInvalidArgument, mmproj.string() + ": " + name + " is " + ggml_type_name(t->type) +
                                                   ", not F16 or F32 (quantise from the float file)");
    }
    const int64_t rows = ggml_nrows(t), cols = t->ne[0];
    std::vector<float> values(static_cast<size_t>(rows * cols));
    if (t->type == GGML_TYPE_F16) {
      ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t*>(t->data), values.data(), rows * cols);
    } else {
      std::memcpy(values.data(), t->data, values.size() * sizeof(float));
    }
    buffers.emplace_back(ggml_row_size(type, cols) * static_cast<size_t>(rows));
    ggml_quantize_chunk(type, values.data(), buffers.back().data(), 0, rows, cols, nullptr);
    gguf_set_tensor_data(out.get(), name.c_str(), buffers.back().data());
  }
  if (!gguf_write_to_file(out.get(), out_path.c_str(), false)) {
    std::error_code ignored;
    std::filesystem::remove(out_path, ignored);
    throw Error(ErrorCode::kIo, "cannot write " + out_path.string());
  }
}

}  // namespace earshot::qwen3asr

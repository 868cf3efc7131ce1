#include "model/llm/random_llm.h"

#include <cmath>
#include <span>

#include "common/error.h"
#include "model/runtime/gguf_file.h"

namespace earshot::llm {

namespace {

constexpr int32_t kControlTokenType = 3;  // llama_token_type LLAMA_TOKEN_TYPE_CONTROL

// splitmix64: fast enough for the 1.8B weights of the benchmark model, and
// the same stream on every platform (std distributions are not).
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform with standard deviation `std` around `mean`.
  float uniform(float mean, float std) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;  // [0, 1)
    return static_cast<float>(mean + (2.0 * u - 1.0) * std * std::sqrt(3.0));
  }
};

uint64_t name_hash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint32_t file_type_of(ggml_type type) {
  switch (type) {  // llama_ftype values
    case GGML_TYPE_F32: return 0;
    case GGML_TYPE_F16: return 1;
    case GGML_TYPE_Q4_0: return 2;
    case GGML_TYPE_Q8_0: return 7;
    case GGML_TYPE_BF16: return 32;
    default:
      throw Error(ErrorCode::kInvalidArgument, std::string("random LLM: weight type ") + ggml_type_name(type) +
                                                   " (use f32, f16, bf16, q8_0 or q4_0)");
  }
}

class TensorMaker {
 public:
  TensorMaker(runtime::GgufWriter& writer, const RandomLlmSpec& spec) : writer_(writer), spec_(spec) {}

  // A matrix [cols, rows] (ggml order), entries of std gain/sqrt(cols).
  void matrix(const std::string& name, int64_t cols, int64_t rows, float std) {
    add(name, spec_.weight_type, {cols, rows}, 0.0f, std);
  }
  // A norm weight around 1: not all ones, so a reference that skips it fails.
  void norm(const std::string& name, int64_t n) { add(name, GGML_TYPE_F32, {n}, 1.0f, 0.1f); }

 private:
  void add(const std::string& name, ggml_type type, std::vector<int64_t> ne, float mean, float std) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    values_.resize(static_cast<std::size_t>(n));
    Random random{spec_.seed ^ name_hash(name)};
    for (float& v : values_) v = random.uniform(mean, std);
    writer_.add_tensor_f32(name, type, ne, values_);
  }

  runtime::GgufWriter& writer_;
  const RandomLlmSpec& spec_;
  std::vector<float> values_;
};

void copy_vocabulary(const RandomLlmSpec& spec, runtime::GgufWriter& writer) {
  const runtime::GgufFile vocab = runtime::GgufFile::open(spec.vocabulary);
  std::vector<std::string> tokens = vocab.get_array<std::string>("tokenizer.ggml.tokens");
  std::vector<int32_t> types =
      vocab.find_array<int32_t>("tokenizer.ggml.token_type").value_or(std::vector<int32_t>(tokens.size(), 1));
  std::optional<std::vector<float>> scores = vocab.find_array<float>("tokenizer.ggml.scores");
  for (const std::string& key : vocab.keys()) {
    if (!key.starts_with("tokenizer.") || key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.token_type" ||
        key == "tokenizer.ggml.scores") {
      continue;
    }
    switch (*vocab.key_type(key)) {
      case runtime::MetaType::kString: writer.set(key, vocab.get<std::string>(key)); break;
      case runtime::MetaType::kU32: writer.set(key, vocab.get<uint32_t>(key)); break;
      case runtime::MetaType::kI32: writer.set(key, vocab.get<int32_t>(key)); break;
      case runtime::MetaType::kF32: writer.set(key, vocab.get<float>(key)); break;
      case runtime::MetaType::kBool: writer.set(key, vocab.get<bool>(key)); break;
      case runtime::MetaType::kArray: {
        const std::vector<std::string> strings = vocab.get_array<std::string>(key);  // merges
        writer.set_array<std::string>(key, strings);
        break;
      }
      default:
        throw Error(ErrorCode::kInvalidArgument, vocab.label() + ": tokenizer key " + key + " has a type (" +
                                                     std::string(runtime::meta_type_name(*vocab.key_type(key))) +
                                                     ") the generator does not copy");
    }
  }
  if (spec.hunyuan_control_tokens) {
    for (const std::string& t : hunyuan_control_tokens()) {
      tokens.push_back(t);
      types.push_back(kControlTokenType);
      if (scores) scores->push_back(0.0f);
    }
    // The end-of-sentence token ends generation, as in Hunyuan's tokenizer.
    const auto eos = static_cast<uint32_t>(tokens.size() - hunyuan_control_tokens().size() + 1);
    writer.set("tokenizer.ggml.eos_token_id", eos);
    writer.set("tokenizer.ggml.eot_token_id", eos);
  }
  writer.set_array<std::string>("tokenizer.ggml.tokens", tokens);
  writer.set_array<int32_t>("tokenizer.ggml.token_type", types);
  if (scores) writer.set_array<float>("tokenizer.ggml.scores", *scores);
}

}  // namespace

RandomLlmSpec RandomLlmSpec::hy_mt2_1_8b(std::filesystem::path vocabulary) {
  RandomLlmSpec spec;
  spec.architecture = "hunyuan-dense";
  spec.vocabulary = std::move(vocabulary);
  spec.hunyuan_control_tokens = true;
  spec.n_embd = 2048;
  spec.n_layer = 32;
  spec.n_head = 16;
  spec.n_head_kv = 4;
  spec.head_dim = 128;
  spec.n_ff = 6144;
  spec.n_ctx_train = 32768;
  spec.rms_eps = 1e-5f;
  spec.weight_type = GGML_TYPE_F16;
  spec.name = "random Hy-MT2-1.8B";
  return spec;
}

const std::vector<std::string>& hunyuan_control_tokens() {
  static const std::vector<std::string> tokens = {
      "<｜hy_begin▁of▁sentence｜>", "<｜hy_end▁of▁sentence｜>",   "<｜hy_User｜>",
      "<｜hy_Assistant｜>",         "<｜hy_place▁holder▁no▁0｜>", "<｜hy_place▁holder▁no▁1｜>",
      "<｜hy_place▁holder▁no▁2｜>", "<｜hy_place▁holder▁no▁3｜>",
  };
  return tokens;
}

void write_random_llm(const RandomLlmSpec& spec, const std::filesystem::path& out) {
  const std::string& arch = spec.architecture;
  if (arch != "qwen3" && arch != "hunyuan-dense") {
    throw Error(ErrorCode::kInvalidArgument,
                "random LLM: architecture '" + arch + "' (the generator writes qwen3 and hunyuan-dense)");
  }
  if (spec.n_embd <= 0 || spec.n_layer <= 0 || spec.n_head <= 0 || spec.n_head_kv <= 0 || spec.head_dim <= 0 ||
      spec.n_ff <= 0 || spec.n_head % spec.n_head_kv != 0 || spec.head_dim % 2 != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "random LLM: dimensions must be positive, head_dim even and n_head a multiple of n_head_kv");
  }
  runtime::GgufWriter writer;
  writer.set_architecture(arch);
  writer.set("general.name", spec.name);
  writer.set("general.file_type", file_type_of(spec.weight_type));
  const std::string p = arch + ".";
  writer.set(p + "context_length", static_cast<uint32_t>(spec.n_ctx_train));
  writer.set(p + "embedding_length", static_cast<uint32_t>(spec.n_embd));
  writer.set(p + "block_count", static_cast<uint32_t>(spec.n_layer));
  writer.set(p + "feed_forward_length", static_cast<uint32_t>(spec.n_ff));
  writer.set(p + "attention.head_count", static_cast<uint32_t>(spec.n_head));
  writer.set(p + "attention.head_count_kv", static_cast<uint32_t>(spec.n_head_kv));
  writer.set(p + "attention.key_length", static_cast<uint32_t>(spec.head_dim));
  writer.set(p + "attention.value_length", static_cast<uint32_t>(spec.head_dim));
  writer.set(p + "attention.layer_norm_rms_epsilon", spec.rms_eps);
  writer.set(p + "rope.freq_base", spec.rope_freq_base);
  writer.set(p + "rope.dimension_count", static_cast<uint32_t>(spec.head_dim));
  copy_vocabulary(spec, writer);
  const int64_t n_vocab =
      static_cast<int64_t>(
          runtime::GgufFile::open(spec.vocabulary).get_array<std::string>("tokenizer.ggml.tokens").size()) +
      (spec.hunyuan_control_tokens ? static_cast<int64_t>(hunyuan_control_tokens().size()) : 0);

  const int64_t d = spec.n_embd, hd = spec.head_dim, q = spec.n_head * hd, kv = spec.n_head_kv * hd, ff = spec.n_ff;
  const auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  TensorMaker make(writer, spec);
  make.matrix("token_embd.weight", d, n_vocab, spec.embedding_std);  // tied: also the output head
  make.norm("output_norm.weight", d);
  for (int l = 0; l < spec.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    make.norm(b + "attn_norm.weight", d);
    make.matrix(b + "attn_q.weight", d, q, inv_sqrt(d));
    make.matrix(b + "attn_k.weight", d, kv, inv_sqrt(d));
    make.matrix(b + "attn_v.weight", d, kv, inv_sqrt(d));
    make.matrix(b + "attn_output.weight", q, d, inv_sqrt(q));
    make.norm(b + "attn_q_norm.weight", hd);
    make.norm(b + "attn_k_norm.weight", hd);
    make.norm(b + "ffn_norm.weight", d);
    make.matrix(b + "ffn_gate.weight", d, ff, inv_sqrt(d));
    make.matrix(b + "ffn_up.weight", d, ff, inv_sqrt(d));
    make.matrix(b + "ffn_down.weight", ff, d, inv_sqrt(ff));
  }
  writer.write(out);
}

}  // namespace earshot::llm

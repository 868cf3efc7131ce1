// Model::load for both formats. The legacy reader walks whisper.cpp's Parakeet
// .bin with every length checked against the bytes left before it is used;
// the GGUF reader reads the same hyper-parameters from keys. Both then check
// the tensor table against expected_tensors() and place the weights through
// the runtime's shared ModelWeights, and copy the decoder's weights to the host.
#include "model/fastconformer/model.h"

#include <ggml-cpu.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/error.h"
#include "model/fastconformer/published_gguf.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"

namespace earshot::fastconformer {
namespace {

[[noreturn]] void invalid(const std::string& label, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, label + ": " + message);
}

// A cursor over a ByteSource: every read is bounds-checked and names what it reads.
class Cursor {
 public:
  Cursor(const runtime::ByteSource& source, std::string label) : source_(source), label_(std::move(label)) {}
  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return source_.size() - offset_; }
  void read(void* dst, uint64_t n, const std::string& what) {
    if (n > remaining())
      invalid(label_, "truncated at " + what + ": expected " + std::to_string(n) + " bytes, got " +
                          std::to_string(remaining()));
    source_.read(offset_, dst, n);
    offset_ += n;
  }
  int32_t i32(const std::string& what) {
    int32_t v = 0;
    read(&v, 4, what);
    return v;
  }
  void skip(uint64_t n, const std::string& what) {
    if (n > remaining())
      invalid(label_, "truncated at " + what + ": expected " + std::to_string(n) + " bytes, got " +
                          std::to_string(remaining()));
    offset_ += n;
  }

 private:
  const runtime::ByteSource& source_;
  std::string label_;
  uint64_t offset_ = 0;
};

void check_range(const std::string& label, const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    invalid(label, std::string("hyper-parameter ") + name + " = " + std::to_string(value) + " is outside [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

void validate(const Hparams& hp, size_t n_filter_bins, size_t n_filter_mels, size_t n_window, size_t n_pieces,
              const std::string& label) {
  check_range(label, "n_vocab", hp.n_vocab, 1, 1 << 20);
  check_range(label, "n_audio_ctx", hp.n_audio_ctx, 8, 1 << 22);
  check_range(label, "n_audio_state", hp.n_state, 2, 16384);
  check_range(label, "n_audio_head", hp.n_head, 1, 256);
  check_range(label, "n_audio_layer", hp.n_layer, 1, 256);
  check_range(label, "n_mels", hp.n_mels, 8, 512);
  check_range(label, "n_fft", hp.n_fft, 16, 1 << 14);
  check_range(label, "n_subsampling_channels", hp.n_sub_channels, 1, 4096);
  check_range(label, "n_conv_kernel", hp.n_conv_kernel, 1, 255);
  check_range(label, "n_pred_dim", hp.n_pred_dim, 1, 16384);
  check_range(label, "n_pred_layers", hp.n_pred_layers, 1, 16);
  check_range(label, "n_max_tokens", hp.n_max_symbols, 1, 1000);
  check_range(label, "ff_expansion", hp.ff_expansion, 1, 16);
  if (hp.n_state % hp.n_head != 0 || hp.d_head() % 2 != 0)
    invalid(label, "n_audio_state " + std::to_string(hp.n_state) + " is not an even head size times n_audio_head " +
                       std::to_string(hp.n_head));
  if (hp.n_conv_kernel % 2 == 0)
    invalid(label, "n_conv_kernel " + std::to_string(hp.n_conv_kernel) + " is even (the depthwise conv is centred)");
  if ((hp.n_fft & (hp.n_fft - 1)) != 0) invalid(label, "n_fft " + std::to_string(hp.n_fft) + " is not a power of two");
  if (n_filter_mels != static_cast<size_t>(hp.n_mels) || n_filter_bins != static_cast<size_t>(hp.n_fft / 2 + 1))
    invalid(label, "the mel filter bank is " + std::to_string(n_filter_mels) + " x " + std::to_string(n_filter_bins) +
                       ", expected " + std::to_string(hp.n_mels) + " x " + std::to_string(hp.n_fft / 2 + 1) +
                       " (n_mels x n_fft/2+1)");
  if (n_window < 2 || n_window > static_cast<size_t>(hp.n_fft))
    invalid(label,
            "the window has " + std::to_string(n_window) + " samples, expected 2 to n_fft " + std::to_string(hp.n_fft));
  if (n_pieces != static_cast<size_t>(hp.n_vocab))
    invalid(label,
            "the vocabulary has " + std::to_string(n_pieces) + " pieces, n_vocab says " + std::to_string(hp.n_vocab));
  if (hp.durations.size() > 64) invalid(label, "more than 64 TDT durations");
  for (int d : hp.durations) check_range(label, "a TDT duration", d, 0, 1000);
  if (hp.n_prompts != 0) {
    check_range(label, "prompt.size", hp.n_prompts, 1, 4096);
    check_range(label, "prompt.hidden", hp.n_prompt_hidden, 1, 65536);
    if (hp.prompt_dictionary.empty()) invalid(label, "a prompt kernel without languages (prompt.languages is empty)");
    for (size_t i = 0; i < hp.prompt_dictionary.size(); ++i) {
      const auto& [language, slot] = hp.prompt_dictionary[i];
      if (slot >= hp.n_prompts)
        invalid(label, "prompt language '" + language + "' has slot " + std::to_string(slot) + ", past prompt.size " +
                           std::to_string(hp.n_prompts));
      if (language.empty() || language.size() > 32)
        invalid(label, "a prompt language of " + std::to_string(language.size()) + " bytes");
      for (size_t j = 0; j < i; ++j)
        if (hp.prompt_dictionary[j].first == language)
          invalid(label, "prompt language '" + language + "' appears twice");
    }
  }
}

struct Parsed {
  Hparams hp;
  std::vector<float> filters, window;
  std::vector<std::string> pieces;
  std::unordered_map<std::string, std::pair<ggml_type, uint64_t>> file_tensors;  // name -> type, offset
  std::unordered_map<std::string, std::array<int64_t, 4>> file_shapes;
  uint64_t tensors_offset = 0;  // legacy: where the tensor records start
};

Parsed parse_legacy(const runtime::ByteSource& source, const std::string& label) {
  Cursor in(source, label);
  Parsed p;
  Hparams& hp = p.hp;
  if (static_cast<uint32_t>(in.i32("the magic")) != runtime::kGgmlMagic) invalid(label, "bad magic");
  int32_t v[15];
  in.read(v, sizeof(v), "the hyper-parameters");
  hp.n_vocab = v[0], hp.n_audio_ctx = v[1], hp.n_state = v[2], hp.n_head = v[3], hp.n_layer = v[4];
  hp.n_mels = v[5];
  hp.n_fft = v[7], hp.subsampling_factor = v[8], hp.n_sub_channels = v[9], hp.n_conv_kernel = v[10];
  hp.n_pred_dim = v[11], hp.n_pred_layers = v[12];
  const int32_t n_durations = v[13];
  hp.n_max_symbols = v[14];
  if (hp.subsampling_factor != 8)
    throw Error(ErrorCode::kUnsupported, label + ": subsampling_factor " + std::to_string(hp.subsampling_factor) +
                                             " (this build computes the 8x dw_striding subsampling only)");
  check_range(label, "n_tdt_durations", n_durations, 0, 64);
  check_range(label, "n_mels", hp.n_mels, 8, 512);
  check_range(label, "n_fft", hp.n_fft, 16, 1 << 14);
  // The format is whisper.cpp's for Parakeet-TDT: its flags are the format's, not the file's.
  const int32_t n_mel = in.i32("the filter bank size"), n_fb = in.i32("the filter bank size");
  check_range(label, "the filter bank's n_mel", n_mel, 1, 512);
  check_range(label, "the filter bank's bins", n_fb, 1, (1 << 13) + 1);
  p.filters.resize(static_cast<size_t>(n_mel) * n_fb);
  in.read(p.filters.data(), p.filters.size() * 4, "the mel filter bank");
  const int32_t n_window = in.i32("the window length");
  check_range(label, "the window length", n_window, 1, 1 << 14);
  p.window.resize(n_window);
  in.read(p.window.data(), p.window.size() * 4, "the window");
  std::vector<uint32_t> durations(n_durations);
  in.read(durations.data(), durations.size() * 4, "the TDT durations");
  hp.durations.assign(durations.begin(), durations.end());
  if (hp.durations.empty())
    throw Error(ErrorCode::kUnsupported, label +
                                             ": a legacy file without TDT durations (whisper.cpp's format is "
                                             "TDT only; write an RNN-T model as GGUF)");
  const int32_t n_pieces = in.i32("the vocabulary size");
  check_range(label, "the vocabulary size", n_pieces, 0, 1 << 20);
  p.pieces.resize(n_pieces);
  for (int32_t i = 0; i < n_pieces; ++i) {
    const int32_t length = in.i32("vocabulary piece " + std::to_string(i));
    check_range(label, "a vocabulary piece length", length, 0, 1024);
    p.pieces[i].resize(length);
    in.read(p.pieces[i].data(), length, "vocabulary piece " + std::to_string(i));
  }
  validate(hp, n_fb, n_mel, p.window.size(), p.pieces.size(), label);
  p.tensors_offset = in.offset();
  while (in.remaining() > 0) {
    const std::string where = "tensor record at byte " + std::to_string(in.offset());
    const int32_t n_dims = in.i32(where), name_length = in.i32(where), type = in.i32(where);
    // 0: a scalar (whisper.cpp's converter squeezes num_batches_tracked to 0 dimensions).
    check_range(label, "a tensor's n_dims", n_dims, 0, 4);
    check_range(label, "a tensor name length", name_length, 1, 256);
    if (type < 0 || type >= GGML_TYPE_COUNT || ggml_type_size(static_cast<ggml_type>(type)) == 0)
      invalid(label, where + " has unknown ggml type " + std::to_string(type));
    std::array<int64_t, 4> ne = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) {
      ne[i] = in.i32(where);
      check_range(label, "a tensor dimension", ne[i], 1, 1 << 24);
    }
    std::string name(name_length, '\0');
    in.read(name.data(), name.size(), where);
    const ggml_type t = static_cast<ggml_type>(type);
    if (ne[0] % ggml_blck_size(t) != 0)
      invalid(label, "tensor " + name + ": rows of " + std::to_string(ne[0]) + " are not whole " + ggml_type_name(t) +
                         " blocks");
    const uint64_t n_bytes = ggml_row_size(t, ne[0]) * ne[1] * ne[2] * ne[3];
    if (!p.file_tensors.emplace(name, std::make_pair(t, in.offset())).second)
      invalid(label, "tensor " + name + " appears twice");
    p.file_shapes[name] = ne;
    in.skip(n_bytes, "tensor " + name);
  }
  return p;
}

std::string key(const char* k) { return std::string(kGgufArchitecture) + "." + k; }

Parsed parse_gguf(const runtime::GgufFile& f, const std::string& label) {
  Parsed p;
  Hparams& hp = p.hp;
  auto u = [&](const char* k) { return static_cast<int>(f.get_u32(key(k))); };
  hp.n_vocab = u("vocab_size");
  read_encoder_keys(f, kGgufArchitecture, label, hp);
  const std::vector<int32_t> context = f.get_array<int32_t>(key("attention.context"));
  if (context.size() != 2) invalid(label, key("attention.context") + " must hold [left, right]");
  hp.att_left = context[0], hp.att_right = context[1];
  if (hp.att_left != -1 || hp.att_right != -1) {
    // A limited context means nothing without its style: never guess one.
    const std::string style = f.get_string(key("attention.context_style"));
    if (style == "regular")
      hp.att_style = AttentionStyle::kRegular;
    else if (style == "chunked_limited")
      hp.att_style = AttentionStyle::kChunkedLimited;
    else
      invalid(label, "unknown " + key("attention.context_style") + " '" + style + "' (regular or chunked_limited)");
  }
  if (f.has(key("attention.right_contexts")))
    hp.att_right_options = f.get_array<int32_t>(key("attention.right_contexts"));
  hp.n_pred_dim = u("prediction.embedding_length");
  hp.n_pred_layers = u("prediction.block_count");
  hp.n_max_symbols = u("decoding.max_symbols");
  const std::string kind = f.get_string(key("decoder.kind"));
  if (kind == "tdt") {
    for (uint32_t d : f.get_array<uint32_t>(key("decoder.durations"))) hp.durations.push_back(static_cast<int>(d));
    if (hp.durations.empty()) invalid(label, key("decoder.durations") + " is empty for a TDT decoder");
  } else if (kind != "rnnt") {
    invalid(label, "unknown " + key("decoder.kind") + " '" + kind + "' (tdt or rnnt)");
  }
  const std::string norm = f.get_string(key("features.normalize"));
  if (norm == "per_feature")
    hp.feature_norm = FeatureNorm::kPerFeature;
  else if (norm == "none")
    hp.feature_norm = FeatureNorm::kNone;
  else
    invalid(label, "unknown " + key("features.normalize") + " '" + norm + "' (per_feature or none)");
  if (f.has(key("prompt.size"))) {
    hp.n_prompts = u("prompt.size");
    hp.n_prompt_hidden = u("prompt.hidden");
    const std::vector<std::string> languages = f.get_array<std::string>(key("prompt.languages"));
    const std::vector<uint32_t> slots = f.get_array<uint32_t>(key("prompt.slots"));
    if (languages.size() != slots.size())
      invalid(label, key("prompt.languages") + " has " + std::to_string(languages.size()) + " entries, " +
                         key("prompt.slots") + " " + std::to_string(slots.size()));
    for (size_t i = 0; i < languages.size(); ++i)
      hp.prompt_dictionary.emplace_back(languages[i], static_cast<int>(std::min<uint32_t>(slots[i], 1u << 30)));
  }
  p.pieces = f.get_array<std::string>("tokenizer.pieces");
  return p;
}

// Host floats of a placed tensor, dequantised.
std::vector<float> host_floats(const ggml_tensor* t) {
  std::vector<uint8_t> bytes(ggml_nbytes(t));
  ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
  std::vector<float> out(ggml_nelements(t));
  if (t->type == GGML_TYPE_F32) {
    std::memcpy(out.data(), bytes.data(), bytes.size());
  } else {
    const auto* traits = ggml_get_type_traits(t->type);
    if (!traits->to_float)
      throw Error(ErrorCode::kUnsupported, std::string("no dequantisation for ggml type ") + ggml_type_name(t->type));
    traits->to_float(bytes.data(), out.data(), ggml_nelements(t));
  }
  return out;
}

// A decoder matrix: host floats, and the stored blocks for ggml's dot products
// (multiplied: true; an embedding's rows are only looked up).
transducer::Matrix host_matrix(const ggml_tensor* t, bool multiplied = true) {
  transducer::Matrix m;
  m.cols = static_cast<int>(t->ne[0]);
  m.rows = static_cast<int>(ggml_nelements(t) / t->ne[0]);
  m.data = host_floats(t);
  m.f16_input = t->type == GGML_TYPE_F16;
  // Types whose CPU dot product (and the vector's conversion to its type) ggml
  // has; any other stays on the dequantised rows.
  const ggml_type_traits_cpu* cpu = ggml_get_type_traits_cpu(t->type);
  if (multiplied && t->type != GGML_TYPE_F32 && cpu->vec_dot && cpu->vec_dot_type != GGML_TYPE_F32 &&
      ggml_get_type_traits_cpu(cpu->vec_dot_type)->from_float) {
    m.type = t->type;
    m.blocks.resize(ggml_nbytes(t));
    ggml_backend_tensor_get(t, m.blocks.data(), 0, m.blocks.size());
  }
  return m;
}

}  // namespace

void read_encoder_keys(const runtime::GgufFile& f, const std::string& arch, const std::string& label, Hparams& hp) {
  const auto key = [&](const char* k) { return arch + "." + k; };
  const auto u = [&](const char* k) { return f.get_count(key(k)); };
  hp.n_audio_ctx = u("audio_ctx");
  hp.n_state = u("embedding_length");
  hp.n_head = u("attention.head_count");
  hp.n_layer = u("block_count");
  hp.ff_expansion = u("feed_forward_expansion");
  hp.eps = f.get_f32(key("attention.layer_norm_epsilon"));
  hp.n_conv_kernel = u("conv.kernel_size");
  hp.conv_norm = [&] {
    const std::string norm = f.get_string(key("conv.norm"));
    if (norm == "batch_norm") return ConvNorm::kBatchNorm;
    if (norm == "layer_norm") return ConvNorm::kLayerNorm;
    invalid(label, "unknown " + key("conv.norm") + " '" + norm + "' (batch_norm or layer_norm)");
  }();
  hp.causal_conv = f.get<bool>(key("conv.causal"));
  hp.subsampling = f.get_string(key("subsampling.kind"));
  hp.subsampling_factor = u("subsampling.factor");
  hp.n_sub_channels = u("subsampling.channels");
  hp.causal_subsampling = f.get<bool>(key("subsampling.causal"));
  hp.xscaling = f.get<bool>(key("xscaling"));
  hp.bias = f.get<bool>(key("bias"));
  hp.n_mels = u("features.n_mels");
  hp.n_fft = u("features.n_fft");
  hp.hop_length = u("features.hop_length");
  hp.sample_rate = u("features.sample_rate");
  hp.preemph = f.get_f32(key("features.preemphasis"));
  hp.log_guard = f.get_f32(key("features.log_guard"));
}

int Hparams::encoder_frames(int n) const {
  for (int i = 0; i < 3; ++i) n = causal_subsampling ? n / 2 + 1 : (n + 1) / 2;
  return n;
}

int Hparams::subsampled_bins() const { return causal_subsampling ? encoder_frames(n_mels) : n_mels / 8; }

bool Hparams::supports_right_context(int right) const {
  if (att_right_options.empty()) return right == att_right;
  return std::find(att_right_options.begin(), att_right_options.end(), right) != att_right_options.end();
}

bool Hparams::streaming() const {
  return causal_subsampling && causal_conv && att_style == AttentionStyle::kChunkedLimited && att_left >= 0 &&
         att_right >= 0 && feature_norm == FeatureNorm::kNone;
}

bool is_matrix_tensor(const std::string& n) {
  for (const char* suffix :
       {"linear1.weight", "linear2.weight", "pointwise_conv1.weight", "pointwise_conv2.weight", "linear_q.weight",
        "linear_k.weight", "linear_v.weight", "linear_out.weight", "linear_pos.weight", "pre_encode.out.weight",
        "joint.enc.weight", "joint.pred.weight", "joint.joint_net.2.weight", "prediction.embed.weight",
        "prompt_kernel.0.weight", "prompt_kernel.2.weight"}) {
    if (n.ends_with(suffix)) return true;
  }
  return n.find("dec_rnn.lstm.weight_") != std::string::npos;
}

std::vector<runtime::ExpectedTensor> expected_encoder_tensors(const Hparams& hp, ggml_type matrix_type) {
  std::vector<runtime::ExpectedTensor> out;
  auto add = [&](std::string name, std::initializer_list<int64_t> ne, ggml_type type = GGML_TYPE_F32) {
    runtime::ExpectedTensor t;
    t.name = std::move(name);
    t.type = is_matrix_tensor(t.name) ? matrix_type : type;
    t.n_dims = static_cast<int>(ne.size());
    std::copy(ne.begin(), ne.end(), t.ne.begin());
    out.push_back(std::move(t));
  };
  const int64_t d = hp.n_state, c = hp.n_sub_channels, ff = hp.ff_expansion * d;
  add("encoder.pre_encode.out.weight", {hp.subsampled_bins() * c, d});
  add("encoder.pre_encode.out.bias", {d});
  for (const char* conv : {"0", "2", "3", "5", "6"}) {
    const bool pointwise = conv[0] == '3' || conv[0] == '6';
    add(std::string("encoder.pre_encode.conv.") + conv + ".weight",
        pointwise ? std::initializer_list<int64_t>{1, 1, c, c} : std::initializer_list<int64_t>{3, 3, 1, c});
    add(std::string("encoder.pre_encode.conv.") + conv + ".bias", {1, 1, c, 1});
  }
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string l = "encoder.layers." + std::to_string(i) + ".";
    add(l + "norm_feed_forward1.weight", {d});
    add(l + "norm_feed_forward1.bias", {d});
    add(l + "feed_forward1.linear1.weight", {d, ff});
    add(l + "feed_forward1.linear2.weight", {ff, d});
    add(l + "norm_conv.weight", {d});
    add(l + "norm_conv.bias", {d});
    add(l + "conv.pointwise_conv1.weight", {d, 2 * d});
    add(l + "conv.depthwise_conv.weight", {hp.n_conv_kernel, d});
    add(l + "conv.batch_norm.weight", {d});  // NeMo keeps the name for its LayerNorm too
    add(l + "conv.batch_norm.bias", {d});
    if (hp.conv_norm == ConvNorm::kBatchNorm) {
      add(l + "conv.batch_norm.running_mean", {d});
      add(l + "conv.batch_norm.running_var", {d});
      add(l + "conv.batch_norm.num_batches_tracked", {1}, GGML_TYPE_I32);  // written, never read (see build)
    }
    add(l + "conv.pointwise_conv2.weight", {d, d});
    add(l + "norm_self_att.weight", {d});
    add(l + "norm_self_att.bias", {d});
    add(l + "self_attn.pos_bias_u", {hp.d_head(), hp.n_head});
    add(l + "self_attn.pos_bias_v", {hp.d_head(), hp.n_head});
    for (const char* m : {"linear_q", "linear_k", "linear_v", "linear_out", "linear_pos"})
      add(l + "self_attn." + m + ".weight", {d, d});
    add(l + "norm_feed_forward2.weight", {d});
    add(l + "norm_feed_forward2.bias", {d});
    add(l + "feed_forward2.linear1.weight", {d, ff});
    add(l + "feed_forward2.linear2.weight", {ff, d});
    add(l + "norm_out.weight", {d});
    add(l + "norm_out.bias", {d});
    if (hp.bias) {
      for (const char* module : {"feed_forward1", "feed_forward2"}) {
        add(l + module + ".linear1.bias", {ff});
        add(l + module + ".linear2.bias", {d});
      }
      for (const char* m : {"linear_q", "linear_k", "linear_v", "linear_out"}) add(l + "self_attn." + m + ".bias", {d});
      add(l + "conv.pointwise_conv1.bias", {2 * d});
      add(l + "conv.depthwise_conv.bias", {d});
      add(l + "conv.pointwise_conv2.bias", {d});
    }
  }
  return out;
}

std::vector<runtime::ExpectedTensor> expected_tensors(const Hparams& hp, ggml_type matrix_type) {
  std::vector<runtime::ExpectedTensor> out = expected_encoder_tensors(hp, matrix_type);
  auto add = [&](std::string name, std::initializer_list<int64_t> ne, ggml_type type = GGML_TYPE_F32) {
    runtime::ExpectedTensor t;
    t.name = std::move(name);
    t.type = is_matrix_tensor(t.name) ? matrix_type : type;
    t.n_dims = static_cast<int>(ne.size());
    std::copy(ne.begin(), ne.end(), t.ne.begin());
    out.push_back(std::move(t));
  };
  const int64_t d = hp.n_state, p = hp.n_pred_dim;
  const int64_t n_out = hp.n_vocab + 1 + static_cast<int64_t>(hp.durations.size());
  add("decoder.prediction.embed.weight", {p, hp.n_vocab + 1});
  for (int i = 0; i < hp.n_pred_layers; ++i) {
    const std::string l = "decoder.prediction.dec_rnn.lstm.";
    add(l + "weight_ih_l" + std::to_string(i), {p, 4 * p});
    add(l + "weight_hh_l" + std::to_string(i), {p, 4 * p});
    add(l + "bias_h_l" + std::to_string(i), {4 * p});
  }
  add("joint.pred.weight", {p, p});
  add("joint.pred.bias", {p});
  add("joint.enc.weight", {d, p});
  add("joint.enc.bias", {p});
  add("joint.joint_net.2.weight", {p, n_out});
  add("joint.joint_net.2.bias", {n_out});
  if (hp.n_prompts > 0) {
    add("prompt_kernel.0.weight", {d + hp.n_prompts, hp.n_prompt_hidden});
    add("prompt_kernel.0.bias", {hp.n_prompt_hidden});
    add("prompt_kernel.2.weight", {hp.n_prompt_hidden, d});
    add("prompt_kernel.2.bias", {d});
  }
  return out;
}

bool reads_model_file(const runtime::ModelFileProbe& f) {
  return f.kind == runtime::ModelFileKind::kGgmlParakeet ||
         (f.kind == runtime::ModelFileKind::kGguf &&
          (f.architecture == kGgufArchitecture || f.published == runtime::PublishedLayout::kTranscribeCppParakeet ||
           f.published == runtime::PublishedLayout::kParakeetCpp));
}

void check_supported(const Hparams& hp, const std::string& label) {
  if (hp.bias)
    throw Error(ErrorCode::kUnsupported,
                label + ": linear biases (bias = true) in a transducer are not computed by this build");
  check_encoder_supported(hp, label);
}

void check_encoder_supported(const Hparams& hp, const std::string& label) {
  auto refuse = [&](const std::string& what) {
    throw Error(ErrorCode::kUnsupported, label + ": " + what + " is not computed by this build");
  };
  if (hp.subsampling != "dw_striding") refuse("subsampling '" + hp.subsampling + "'");
  if (hp.subsampling_factor != 8) refuse("subsampling factor " + std::to_string(hp.subsampling_factor));
  if (hp.n_mels % 8 != 0) refuse("n_mels " + std::to_string(hp.n_mels) + " (not a multiple of 8)");
  if (hp.att_left < -1 || hp.att_right < -1)
    refuse("attention context [" + std::to_string(hp.att_left) + ", " + std::to_string(hp.att_right) + "]");
  for (int r : hp.att_right_options)
    if (r < 0) refuse("right context option " + std::to_string(r));
  if (!hp.att_right_options.empty() && !hp.supports_right_context(hp.att_right))
    refuse("attention.right_contexts without the default right context " + std::to_string(hp.att_right));
  if (hp.hop_length != 160 || hp.sample_rate != 16000) refuse("features other than 16 kHz with a 160-sample hop");
}

void check_streaming(const Hparams& hp, int right, const std::string& label) {
  auto refuse = [&](const std::string& why) { throw Error(ErrorCode::kUnsupported, label + " cannot stream: " + why); };
  if (!hp.causal_subsampling) refuse("its subsampling is not causal");
  if (!hp.causal_conv) refuse("its depthwise conv is not causal");
  if (hp.att_style != AttentionStyle::kChunkedLimited || hp.att_right < 0)
    refuse("its attention is not chunked_limited with a right context");
  if (hp.att_left < 0) refuse("its left attention context is unlimited");
  if (hp.n_conv_kernel < 3) refuse("its depthwise conv has no left context (kernel 1)");
  if (hp.feature_norm != FeatureNorm::kNone) refuse("its features are normalised over the utterance");
  if (!hp.supports_right_context(right)) {
    std::string options;
    for (int r : hp.att_right_options.empty() ? std::vector<int>{hp.att_right} : hp.att_right_options)
      options += (options.empty() ? "" : ", ") + std::to_string((r + 1) * 80) + " ms (" + std::to_string(r) + ")";
    throw Error(ErrorCode::kInvalidArgument, label + ": right context " + std::to_string(right) +
                                                 " frames is not one the model supports: " + options);
  }
}

int prompt_slot(const Hparams& hp, const std::string& language) {
  if (hp.n_prompts == 0)
    throw Error(ErrorCode::kInvalidArgument, "this model has no language prompt (language '" + language + "')");
  for (const auto& [tag, slot] : hp.prompt_dictionary)
    if (tag == language) return slot;
  if (language != "auto") {
    for (const auto& [tag, slot] : hp.prompt_dictionary)
      if (tag.size() > language.size() && tag.starts_with(language) && tag[language.size()] == '-') return slot;
  }
  std::string known;
  for (const auto& [tag, slot] : hp.prompt_dictionary) known += (known.empty() ? "" : ", ") + tag;
  throw Error(ErrorCode::kInvalidArgument,
              language == "auto" ? "this model has no auto language slot: choose a language (" + known + ")"
                                 : "unknown language '" + language + "' for this model (it takes " + known + ")");
}

std::vector<std::string> prompt_languages(const Hparams& hp) {
  std::vector<std::string> out;
  auto add = [&](const std::string& code) {
    if (std::find(out.begin(), out.end(), code) == out.end()) out.push_back(code);
  };
  for (const auto& [tag, slot] : hp.prompt_dictionary) {
    if (tag == "auto") continue;
    add(tag.substr(0, tag.find('-')));
    add(tag);
  }
  return out;
}

// BatchNorm's training counters (encoder.layers.N.conv.batch_norm.num_batches_tracked)
// take no part in inference. Files carry them as one element of whatever type
// their writer chose: whisper.cpp's converter a 0-dimensional f32 (it squeezes
// the int64 scalar and writes every tensor of under 2 dimensions as f32), its
// test-model generator and earshot's legacy writer an i32 [1]; GGUF leaves them
// out. Any of these is accepted and dropped; another type or size is refused.
void drop_batch_norm_counters(Parsed& p, const std::string& label) {
  for (int i = 0; i < p.hp.n_layer && p.hp.conv_norm == ConvNorm::kBatchNorm; ++i) {
    const std::string name = "encoder.layers." + std::to_string(i) + ".conv.batch_norm.num_batches_tracked";
    auto it = p.file_tensors.find(name);
    if (it == p.file_tensors.end()) continue;
    const auto& ne = p.file_shapes.at(name);
    const ggml_type type = it->second.first;
    if (ne[0] * ne[1] * ne[2] * ne[3] != 1 || (type != GGML_TYPE_I32 && type != GGML_TYPE_F32))
      invalid(label, "tensor " + name + " (BatchNorm's training counter, unused) has type " + ggml_type_name(type) +
                         " and shape " + runtime::shape_string(4, ne.data()) + ", expected one i32 or f32 element");
    p.file_tensors.erase(it);
    p.file_shapes.erase(name);
  }
}

// The encoder weights its graphs use only as the weight of runtime::MatMul /
// runtime::mul_mat products (encoder.cpp, streaming_graph.cpp): those may live on AMX.
bool is_product_weight(std::string_view name) {
  if (name == "encoder.pre_encode.out.weight") return true;
  if (!name.starts_with("encoder.layers.")) return false;
  for (const char* suffix :
       {".linear1.weight", ".linear2.weight", ".pointwise_conv1.weight", ".pointwise_conv2.weight", ".linear_q.weight",
        ".linear_k.weight", ".linear_v.weight", ".linear_out.weight", ".linear_pos.weight"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// Fills a Model from parsed metadata and its tensor table.
struct ModelBuilder {
  static std::shared_ptr<const Model> build(Parsed p, const runtime::ByteSource& source, ggml_backend_dev_t device,
                                            const std::string& label, const std::string& format, bool amx) {
    check_supported(p.hp, label);
    std::vector<runtime::ExpectedTensor> expected = expected_tensors(p.hp, GGML_TYPE_F32);
    // A matrix takes the type its file gives it (whisper.cpp's quantiser keeps the
    // 640-wide decoder matrices f32 where rows are not whole K-quant blocks); the rest is f32.
    for (runtime::ExpectedTensor& t : expected) {
      auto it = p.file_tensors.find(t.name);
      if (it == p.file_tensors.end() || !is_matrix_tensor(t.name)) continue;
      const ggml_type type = it->second.first;
      if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 && !ggml_is_quantized(type))
        invalid(label,
                "tensor " + t.name + " has type " + ggml_type_name(type) + ", expected a float or quantised type");
      t.type = type;
    }
    std::erase_if(expected, [](const runtime::ExpectedTensor& t) { return t.name.ends_with("num_batches_tracked"); });
    drop_batch_norm_counters(p, label);
    std::vector<runtime::TensorPlacement> placements;
    std::vector<std::string> missing;
    for (const runtime::ExpectedTensor& t : expected) {
      auto it = p.file_tensors.find(t.name);
      if (it == p.file_tensors.end()) {
        missing.push_back(t.name);
        continue;
      }
      const auto& ne = p.file_shapes.at(t.name);
      if (ne != t.ne)
        invalid(label, "tensor " + t.name + " has shape " + runtime::shape_string(4, ne.data()) + ", expected " +
                           runtime::shape_string(4, t.ne.data()));
      if (it->second.first != t.type)
        invalid(label, "tensor " + t.name + " has type " + ggml_type_name(it->second.first) + ", expected " +
                           ggml_type_name(t.type));
      placements.push_back({t, it->second.second});
    }
    if (!missing.empty()) {
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 4; ++i) names += (i ? ", " : "") + missing[i];
      invalid(label, std::to_string(missing.size()) + " of " + std::to_string(expected.size()) +
                         " tensors are missing: " + names + (missing.size() > 4 ? ", ..." : ""));
    }
    if (p.file_tensors.size() != placements.size()) {
      // Not a structured binding: a lambda capturing one needs clang 16 (the fuzz flavour's clang is 14).
      for (const auto& entry : p.file_tensors) {
        const std::string& name = entry.first;
        if (std::none_of(placements.begin(), placements.end(),
                         [&](const runtime::TensorPlacement& t) { return t.tensor.name == name; }))
          invalid(label, "unexpected tensor '" + name + "'");
      }
    }
    auto model = std::make_shared<Model>();
    model->hparams_ = std::move(p.hp);
    model->filters_ = std::move(p.filters);
    model->window_ = std::move(p.window);
    model->pieces_ = std::move(p.pieces);
    model->format_ = format;
    model->device_ = device;
    model->weights_ = runtime::ModelWeights::load(source, placements, device, label,
                                                  amx ? std::function(is_product_weight) : nullptr);
    wire(*model);
    return model;
  }

  static std::shared_ptr<const Model> encoder_only(Hparams hp, runtime::ModelWeights weights, ggml_backend_dev_t device,
                                                   const std::string& label) {
    check_encoder_supported(hp, label);
    auto model = std::make_shared<Model>();
    model->hparams_ = std::move(hp);
    model->format_ = "gguf";
    model->device_ = device;
    model->weights_ = std::move(weights);
    for (const runtime::ExpectedTensor& t : expected_encoder_tensors(model->hparams_, GGML_TYPE_F32))
      if (!t.name.ends_with("num_batches_tracked") && !model->weights_.find(t.name))
        invalid(label, "tensor " + t.name + " is missing");
    wire_encoder(*model);
    return model;
  }

  static void wire(Model& m) {
    wire_encoder(m);
    wire_decoder(m);
  }

  static void wire_encoder(Model& m) {
    auto get = [&](const std::string& name) { return m.weights_.find(name); };
    const char* convs[5] = {"0", "2", "3", "5", "6"};
    for (int i = 0; i < 5; ++i) {
      m.pre_conv_w[i] = get(std::string("encoder.pre_encode.conv.") + convs[i] + ".weight");
      m.pre_conv_b[i] = get(std::string("encoder.pre_encode.conv.") + convs[i] + ".bias");
    }
    m.pre_out_w = get("encoder.pre_encode.out.weight");
    m.pre_out_b = get("encoder.pre_encode.out.bias");
    const Hparams& hp = m.hparams_;
    for (int i = 0; i < hp.n_layer; ++i) {
      const std::string l = "encoder.layers." + std::to_string(i) + ".";
      Layer y;
      y.norm_ff1_w = get(l + "norm_feed_forward1.weight"), y.norm_ff1_b = get(l + "norm_feed_forward1.bias");
      y.ff1_w1 = get(l + "feed_forward1.linear1.weight"), y.ff1_w2 = get(l + "feed_forward1.linear2.weight");
      y.norm_att_w = get(l + "norm_self_att.weight"), y.norm_att_b = get(l + "norm_self_att.bias");
      y.q_w = get(l + "self_attn.linear_q.weight"), y.k_w = get(l + "self_attn.linear_k.weight");
      y.v_w = get(l + "self_attn.linear_v.weight"), y.out_w = get(l + "self_attn.linear_out.weight");
      y.pos_w = get(l + "self_attn.linear_pos.weight");
      y.pos_bias_u = get(l + "self_attn.pos_bias_u"), y.pos_bias_v = get(l + "self_attn.pos_bias_v");
      y.norm_conv_w = get(l + "norm_conv.weight"), y.norm_conv_b = get(l + "norm_conv.bias");
      y.pw1_w = get(l + "conv.pointwise_conv1.weight"), y.dw_w = get(l + "conv.depthwise_conv.weight");
      y.bn_w = get(l + "conv.batch_norm.weight"), y.bn_b = get(l + "conv.batch_norm.bias");
      y.bn_mean = y.bn_var = nullptr;
      if (hp.conv_norm == ConvNorm::kBatchNorm)
        y.bn_mean = get(l + "conv.batch_norm.running_mean"), y.bn_var = get(l + "conv.batch_norm.running_var");
      y.pw2_w = get(l + "conv.pointwise_conv2.weight");
      y.norm_ff2_w = get(l + "norm_feed_forward2.weight"), y.norm_ff2_b = get(l + "norm_feed_forward2.bias");
      y.ff2_w1 = get(l + "feed_forward2.linear1.weight"), y.ff2_w2 = get(l + "feed_forward2.linear2.weight");
      y.norm_out_w = get(l + "norm_out.weight"), y.norm_out_b = get(l + "norm_out.bias");
      if (hp.bias) {
        y.ff1_b1 = get(l + "feed_forward1.linear1.bias"), y.ff1_b2 = get(l + "feed_forward1.linear2.bias");
        y.ff2_b1 = get(l + "feed_forward2.linear1.bias"), y.ff2_b2 = get(l + "feed_forward2.linear2.bias");
        y.q_b = get(l + "self_attn.linear_q.bias"), y.k_b = get(l + "self_attn.linear_k.bias");
        y.v_b = get(l + "self_attn.linear_v.bias"), y.out_b = get(l + "self_attn.linear_out.bias");
        y.pw1_b = get(l + "conv.pointwise_conv1.bias"), y.dw_b = get(l + "conv.depthwise_conv.bias");
        y.pw2_b = get(l + "conv.pointwise_conv2.bias");
      }
      m.layers.push_back(y);
    }
  }

  static void wire_decoder(Model& m) {
    auto get = [&](const std::string& name) { return m.weights_.find(name); };
    const Hparams& hp = m.hparams_;
    transducer::DecoderWeights& w = m.decoder_;
    w.n_vocab = hp.n_vocab;
    w.pred_dim = hp.n_pred_dim;
    w.durations = hp.durations;
    w.max_symbols = hp.n_max_symbols;
    w.embed = host_matrix(get("decoder.prediction.embed.weight"), /*multiplied=*/false);
    for (int i = 0; i < hp.n_pred_layers; ++i) {
      const std::string l = "decoder.prediction.dec_rnn.lstm.";
      transducer::LstmLayer layer;
      layer.w_ih = host_matrix(get(l + "weight_ih_l" + std::to_string(i)));
      layer.w_hh = host_matrix(get(l + "weight_hh_l" + std::to_string(i)));
      layer.bias = host_floats(get(l + "bias_h_l" + std::to_string(i)));
      w.lstm.push_back(std::move(layer));
    }
    w.joint_pred = host_matrix(get("joint.pred.weight"));
    w.joint_pred_bias = host_floats(get("joint.pred.bias"));
    w.joint_enc = host_matrix(get("joint.enc.weight"));
    w.joint_enc_bias = host_floats(get("joint.enc.bias"));
    w.joint_out = host_matrix(get("joint.joint_net.2.weight"));
    w.joint_out_bias = host_floats(get("joint.joint_net.2.bias"));
    if (hp.n_prompts > 0) {
      w.prompt.n_prompts = hp.n_prompts;
      w.prompt.w1 = host_matrix(get("prompt_kernel.0.weight"));
      w.prompt.b1 = host_floats(get("prompt_kernel.0.bias"));
      w.prompt.w2 = host_matrix(get("prompt_kernel.2.weight"));
      w.prompt.b2 = host_floats(get("prompt_kernel.2.bias"));
    }
  }
};

namespace {

// transcribe.cpp's and parakeet.cpp's Parakeet GGUFs (published_gguf.h), translated to this model.
std::shared_ptr<const Model> load_published(const runtime::GgufFile& file, runtime::PublishedLayout layout,
                                            const runtime::ByteSource& source, ggml_backend_dev_t device, bool amx) {
  PublishedModel m = read_published_hparams(file, layout, source);
  const size_t mels = static_cast<size_t>(std::max(1, m.hp.n_mels));
  validate(m.hp, m.filters.size() / mels, m.filters.size() % mels == 0 ? mels : 0, m.window.size(), m.pieces.size(),
           file.label());
  check_supported(m.hp, file.label());
  translate_published_tensors(file, layout, source, m);
  Parsed p;
  p.hp = std::move(m.hp);
  p.filters = std::move(m.filters);
  p.window = std::move(m.window);
  p.pieces = std::move(m.pieces);
  for (const auto& [name, t] : m.tensors) {
    p.file_tensors.emplace(name, std::make_pair(t.type, t.offset));
    p.file_shapes[name] = t.ne;
  }
  return ModelBuilder::build(std::move(p), runtime::ByteSource::with_appendix(source, m.appendix), device, file.label(),
                             "gguf (" + std::string(runtime::project_name(layout)) + ")", amx);
}

}  // namespace

std::shared_ptr<const Model> Model::encoder_only(Hparams hp, runtime::ModelWeights weights, ggml_backend_dev_t device,
                                                 const std::string& label) {
  return ModelBuilder::encoder_only(std::move(hp), std::move(weights), device, label);
}

uint64_t legacy_tensors_offset(const std::filesystem::path& path) {
  return parse_legacy(runtime::ByteSource::file(path), "model file " + path.string()).tensors_offset;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, ggml_backend_dev_t device, bool amx) {
  const std::string label = "model file " + path.string();
  const runtime::ModelFileProbe probe = runtime::probe_model_file(path);
  const runtime::ByteSource source = runtime::ByteSource::file(path);
  if (probe.kind == runtime::ModelFileKind::kGguf) {
    const runtime::GgufFile file = runtime::GgufFile::open(path);
    if (probe.published == runtime::PublishedLayout::kTranscribeCppParakeet ||
        probe.published == runtime::PublishedLayout::kParakeetCpp)
      return load_published(file, probe.published, source, device, amx);
    if (file.architecture() != kGgufArchitecture)
      invalid(label, "architecture '" + file.architecture() + "', expected '" + kGgufArchitecture + "'");
    Parsed p = parse_gguf(file, file.label());
    const runtime::GgufTensor* fb = file.find_tensor("preprocessor.featurizer.fb");
    const runtime::GgufTensor* window = file.find_tensor("preprocessor.featurizer.window");
    if (!fb || !window || fb->type != GGML_TYPE_F32 || window->type != GGML_TYPE_F32 || fb->n_dims != 2 ||
        window->n_dims != 1)
      invalid(file.label(),
              "needs f32 tensors preprocessor.featurizer.fb [bins, mels] and preprocessor.featurizer.window");
    p.filters.resize(fb->ne[0] * fb->ne[1]);
    p.window.resize(window->ne[0]);
    source.read(fb->offset, p.filters.data(), p.filters.size() * 4);
    source.read(window->offset, p.window.data(), p.window.size() * 4);
    validate(p.hp, fb->ne[0], fb->ne[1], p.window.size(), p.pieces.size(), file.label());
    for (const runtime::GgufTensor& t : file.tensors()) {
      if (&t == fb || &t == window) continue;
      p.file_tensors.emplace(t.name, std::make_pair(t.type, t.offset));
      p.file_shapes[t.name] = t.ne;
    }
    return ModelBuilder::build(std::move(p), source, device, file.label(), "gguf", amx);
  }
  // A legacy file too short to show the Parakeet signature is read as one, to name where it ends.
  const bool short_legacy = probe.kind == runtime::ModelFileKind::kGgmlWhisper && source.size() < 4 + 17 * 4;
  if (probe.kind != runtime::ModelFileKind::kGgmlParakeet && !short_legacy)
    throw Error(ErrorCode::kInvalidModel, label + " is " + probe.description + ", not a FastConformer transducer");
  return ModelBuilder::build(parse_legacy(source, label), source, device, label, "ggml-legacy", amx);
}

}  // namespace earshot::fastconformer

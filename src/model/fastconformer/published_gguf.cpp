#include "model/fastconformer/published_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "common/error.h"
#include "model/fastconformer/nemo_featuriser.h"

namespace earshot::fastconformer {
namespace {

using runtime::GgufFile;
using runtime::GgufTensor;
using runtime::PublishedLayout;

// NeMo's conformer-layer module prefixes and transcribe.cpp's (convert-parakeet.py's
// ENCODER_BLOCK_TABLE and its bias table name the same modules).
constexpr std::pair<std::string_view, std::string_view> kBlockPrefixes[] = {
    {"norm_feed_forward1.", "norm_ff1."},
    {"feed_forward1.", "ff1."},
    {"norm_feed_forward2.", "norm_ff2."},
    {"feed_forward2.", "ff2."},
    {"norm_self_att.", "norm_attn."},
    {"self_attn.", "attn."},
    {"norm_conv.", "norm_conv."},
    {"conv.pointwise_conv1.", "conv.pointwise1."},
    {"conv.pointwise_conv2.", "conv.pointwise2."},
    {"conv.depthwise_conv.", "conv.depthwise."},
    {"conv.batch_norm.", "conv.bn."},
    {"norm_out.", "norm_out."},
};

// Reads keys of one layout; every refusal names the key and the project.
class Keys {
 public:
  Keys(const GgufFile& f, PublishedLayout layout, std::string prefix)
      : f_(f), project_(runtime::project_name(layout)), prefix_(std::move(prefix)) {}
  const GgufFile& file() const { return f_; }
  std::string key(std::string_view k) const { return prefix_ + std::string(k); }
  int u(std::string_view k) const { return f_.get_count(key(k)); }
  template <typename T>
  std::optional<T> find(std::string_view k) const {
    return f_.find<T>(key(k));
  }
  [[noreturn]] void unsupported(std::string_view k, const std::string& what) const {
    throw Error(ErrorCode::kUnsupported, f_.label() + ": " + key(k) + " " + what + " in this " + project_ +
                                             " file is not computed by this build");
  }
  [[noreturn]] void invalid(const std::string& what) const {
    throw Error(ErrorCode::kInvalidModel, f_.label() + " (" + project_ + " layout): " + what);
  }
  const std::string& project() const { return project_; }

 private:
  const GgufFile& f_;
  std::string project_, prefix_;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Attention context pairs [l0, r0, l1, r1, ...]: the right contexts, each left the same.
void context_choices(const Keys& k, std::string_view key, Hparams& hp) {
  const auto flat = k.file().find_array<int32_t>(k.key(key));
  if (!flat || flat->size() <= 2) return;
  if (flat->size() % 2 != 0) k.invalid(k.key(key) + " has an odd number of entries");
  if ((*flat)[0] != hp.att_left || (*flat)[1] != hp.att_right)
    k.invalid(k.key(key) + " does not start with the attention context [" + std::to_string(hp.att_left) + ", " +
              std::to_string(hp.att_right) + "]");
  for (size_t i = 0; i < flat->size(); i += 2) {
    if ((*flat)[i] != hp.att_left)
      k.unsupported(key, "with left contexts other than " + std::to_string(hp.att_left) + " (" +
                             std::to_string((*flat)[i]) + ")");
    hp.att_right_options.push_back((*flat)[i + 1]);
  }
}

AttentionStyle attention_style(const Keys& k, std::string_view key) {
  const std::string style = k.find<std::string>(key).value_or("regular");
  if (style == "regular") return AttentionStyle::kRegular;
  if (style == "chunked_limited") return AttentionStyle::kChunkedLimited;
  k.unsupported(key, "= " + quoted(style));
}

ConvNorm conv_norm(const Keys& k, std::string_view key) {
  const std::string norm = k.find<std::string>(key).value_or("batch_norm");
  if (norm == "batch_norm") return ConvNorm::kBatchNorm;
  if (norm == "layer_norm") return ConvNorm::kLayerNorm;
  k.unsupported(key, "= " + quoted(norm));
}

void prompt_dictionary(const Keys& k, std::string_view keys_key, std::string_view values_key, Hparams& hp) {
  const std::vector<std::string> locales = k.file().get_array<std::string>(k.key(keys_key));
  const std::vector<int32_t> slots = k.file().get_array<int32_t>(k.key(values_key));
  if (locales.size() != slots.size()) k.invalid(k.key(keys_key) + " and " + k.key(values_key) + " differ in length");
  for (size_t i = 0; i < locales.size(); ++i) {
    if (slots[i] < 0) k.invalid(k.key(values_key) + " holds " + std::to_string(slots[i]));
    // NeMo's dictionaries name one slot under several spellings (en, en-US); earshot's takes each tag once.
    if (std::none_of(hp.prompt_dictionary.begin(), hp.prompt_dictionary.end(),
                     [&](const auto& e) { return e.first == locales[i]; }))
      hp.prompt_dictionary.emplace_back(locales[i], slots[i]);
  }
}

// transcribe.cpp: stt.parakeet.* and stt.frontend.* (read_parakeet_hparams's keys).
void transcribe_cpp_hparams(const GgufFile& f, PublishedModel& m) {
  const Keys k(f, PublishedLayout::kTranscribeCppParakeet, "stt.parakeet.");
  Hparams& hp = m.hp;
  const std::string head = k.find<std::string>("head_kind").value_or("tdt");
  if (head != "tdt" && head != "rnnt")
    k.unsupported("head_kind", "= " + quoted(head) + " (earshot runs TDT and RNN-T transducer heads)");
  hp.n_layer = k.u("encoder.n_layers");
  hp.n_state = k.u("encoder.d_model");
  hp.n_head = k.u("encoder.n_heads");
  const int d_ff = k.u("encoder.d_ff");
  if (hp.n_state <= 0 || d_ff % hp.n_state != 0) k.unsupported("encoder.d_ff", "= " + std::to_string(d_ff));
  hp.ff_expansion = d_ff / hp.n_state;
  hp.n_conv_kernel = k.u("encoder.conv_kernel");
  hp.subsampling_factor = k.u("encoder.subsampling_factor");
  hp.n_sub_channels = k.u("encoder.subsampling_channels");
  hp.n_audio_ctx = k.u("encoder.pos_emb_max_len");
  if (k.find<bool>("encoder.use_bias").value_or(false)) k.unsupported("encoder.use_bias", "= true (linear biases)");
  hp.xscaling = k.find<bool>("encoder.xscaling").value_or(false);
  hp.att_left = k.find<int32_t>("encoder.att_context_left").value_or(-1);
  hp.att_right = k.find<int32_t>("encoder.att_context_right").value_or(-1);
  hp.att_style = attention_style(k, "encoder.att_context_style");
  if (hp.att_style == AttentionStyle::kChunkedLimited) context_choices(k, "encoder.att_context_size_choices", hp);
  // transcribe.cpp infers NeMo's causal_downsampling from the style, as its encoder does.
  hp.causal_subsampling = hp.att_style == AttentionStyle::kChunkedLimited;
  const int kernel = hp.n_conv_kernel;
  const int conv_left = k.find<int32_t>("encoder.conv_context_left").value_or(-1);
  const int conv_right = k.find<int32_t>("encoder.conv_context_right").value_or(-1);
  if (conv_left == kernel - 1 && conv_right == 0 && kernel > 1) {
    hp.causal_conv = true;
  } else if (!(conv_left == -1 && conv_right == -1) && !(conv_left == (kernel - 1) / 2 && conv_right == conv_left)) {
    k.unsupported("encoder.conv_context_left",
                  "/ conv_context_right = [" + std::to_string(conv_left) + ", " + std::to_string(conv_right) + "]");
  }
  hp.conv_norm = conv_norm(k, "encoder.conv_norm_type");
  if (const auto layers = f.find_array<int32_t>("stt.parakeet.encoder.spk_kernel_layers"); layers && !layers->empty())
    k.unsupported("encoder.spk_kernel_layers", "(multitalker speaker kernels)");
  hp.n_pred_dim = k.u("predictor.hidden");
  hp.n_pred_layers = k.u("predictor.n_layers");
  const int pred_vocab = k.u("predictor.vocab");
  if (k.u("joint.hidden") != hp.n_pred_dim)
    k.unsupported("joint.hidden", "= " + std::to_string(k.u("joint.hidden")) + " (unlike predictor.hidden " +
                                      std::to_string(hp.n_pred_dim) + ")");
  if (const std::string act = f.get_string("stt.parakeet.joint.activation"); act != "relu")
    k.unsupported("joint.activation", "= " + quoted(act));
  if (head == "tdt") {
    for (int32_t d : f.get_array<int32_t>("stt.parakeet.tdt.durations")) hp.durations.push_back(d);
    if (hp.durations.empty()) k.invalid("stt.parakeet.tdt.durations is empty");
    hp.n_max_symbols = static_cast<int>(f.find_u32("stt.parakeet.tdt.max_symbols").value_or(10));
  } else {
    hp.n_max_symbols = 10;  // transcribe.cpp's per-frame bound for RNN-T (no key)
  }
  if (k.u("joint.num_extra_outputs") != static_cast<int>(hp.durations.size()))
    k.invalid("stt.parakeet.joint.num_extra_outputs differs from the number of TDT durations");
  if (f.has("stt.parakeet.prompt.num_prompts") && k.u("prompt.num_prompts") > 0) {
    hp.n_prompts = k.u("prompt.num_prompts");
    hp.n_prompt_hidden = k.u("prompt.hidden");
    if (const std::string act = f.get_string("stt.parakeet.prompt.activation"); act != "relu")
      k.unsupported("prompt.activation", "= " + quoted(act));
    prompt_dictionary(k, "prompt.dictionary.locales", "prompt.dictionary.indices", hp);
  }

  const Keys fe(f, PublishedLayout::kTranscribeCppParakeet, "stt.frontend.");
  if (const std::string type = f.get_string("stt.frontend.type"); type != "mel")
    fe.unsupported("type", "= " + quoted(type));
  if (const std::string window = f.get_string("stt.frontend.window"); window != "hann")
    fe.unsupported("window", "= " + quoted(window));
  hp.n_mels = fe.u("num_mels");
  hp.sample_rate = fe.u("sample_rate");
  hp.n_fft = fe.u("n_fft");
  hp.hop_length = fe.u("hop_length");
  const int win_length = fe.u("win_length");
  hp.preemph = f.get_f32("stt.frontend.pre_emphasis");
  const std::string norm = f.get_string("stt.frontend.normalize");
  if (norm == "per_feature")
    hp.feature_norm = FeatureNorm::kPerFeature;
  else if (norm == "none")
    hp.feature_norm = FeatureNorm::kNone;
  else
    fe.unsupported("normalize", "= " + quoted(norm));
  hp.log_guard = 5.960464477539063e-08f;  // NeMo's 2^-24, which transcribe.cpp's frontend uses (no key)
  const float f_min = f.get_f32("stt.frontend.f_min"), f_max = f.get_f32("stt.frontend.f_max");
  if (win_length < 2 || win_length > hp.n_fft || hp.n_mels < 1 || hp.n_mels > 512 || hp.n_fft > (1 << 14))
    fe.invalid("stt.frontend.win_length " + std::to_string(win_length) + " with n_fft " + std::to_string(hp.n_fft) +
               " and num_mels " + std::to_string(hp.n_mels));
  if (!(f_min >= 0 && f_max > f_min && f_max <= hp.sample_rate / 2.0f))
    fe.invalid("stt.frontend.f_min/f_max " + std::to_string(f_min) + "/" + std::to_string(f_max));
  // The file has no filter bank: librosa's Slaney one, as transcribe.cpp's frontend and NeMo compute it.
  m.filters = slaney_mel_filters(hp.n_mels, hp.n_fft, hp.sample_rate, f_min, f_max);
  m.window = symmetric_hann_window(win_length);

  // tokenizer.ggml.tokens: the pieces, then the blank transcribe.cpp appends.
  std::vector<std::string> tokens = f.get_array<std::string>("tokenizer.ggml.tokens");
  if (pred_vocab < 2) k.invalid("stt.parakeet.predictor.vocab is " + std::to_string(pred_vocab));
  if (static_cast<int>(tokens.size()) != pred_vocab)
    k.invalid("tokenizer.ggml.tokens has " + std::to_string(tokens.size()) + " entries, stt.parakeet.predictor.vocab " +
              std::to_string(pred_vocab));
  if (const auto blank = f.find_u32("tokenizer.ggml.blank_token_id");
      blank && static_cast<int>(*blank) != pred_vocab - 1)
    k.invalid("tokenizer.ggml.blank_token_id is not the last token");
  tokens.pop_back();
  hp.n_vocab = static_cast<int>(tokens.size());
  m.pieces = std::move(tokens);
}

// parakeet.cpp: parakeet.* (convert_parakeet_to_gguf.py's keys; the streaming.* block
// holds NeMo's derived cache sizes, which earshot derives from the same attention context).
void parakeet_cpp_hparams(const GgufFile& f, PublishedModel& m) {
  const Keys k(f, PublishedLayout::kParakeetCpp, "parakeet.");
  Hparams& hp = m.hp;
  const std::string arch = f.get_string("parakeet.arch");
  const bool tdt = arch == "tdt" || arch == "hybrid_tdt_ctc";
  if (!tdt && arch != "rnnt" && arch != "hybrid_rnnt_ctc")
    k.unsupported("arch", "= " + quoted(arch) + " (earshot runs TDT and RNN-T transducer heads)");
  hp.n_state = k.u("encoder.d_model");
  hp.n_layer = k.u("encoder.n_layers");
  hp.n_head = k.u("encoder.n_heads");
  const int d_ff = k.u("encoder.ff_dim");
  if (hp.n_state <= 0 || d_ff % hp.n_state != 0) k.unsupported("encoder.ff_dim", "= " + std::to_string(d_ff));
  hp.ff_expansion = d_ff / hp.n_state;
  hp.n_conv_kernel = k.u("encoder.conv_kernel");
  hp.conv_norm = conv_norm(k, "encoder.conv_norm_type");
  hp.subsampling_factor = k.u("encoder.subsampling_factor");
  hp.n_sub_channels = k.u("encoder.subsampling_conv_channels");
  hp.xscaling = f.get<bool>("parakeet.encoder.xscaling");
  hp.n_audio_ctx = k.u("encoder.pos_emb_max_len");
  hp.att_left = k.find<int32_t>("encoder.att_context_left").value_or(-1);
  hp.att_right = k.find<int32_t>("encoder.att_context_right").value_or(-1);
  hp.att_style = attention_style(k, "encoder.att_context_style");
  context_choices(k, "encoder.att_context_presets", hp);
  hp.causal_subsampling = k.find<bool>("encoder.causal_downsampling").value_or(false);
  hp.causal_conv = k.find<bool>("encoder.conv_causal").value_or(false);
  if (k.find<bool>("prompt.present").value_or(false)) {
    hp.n_prompts = k.u("prompt.num_prompts");
    const GgufTensor* w = f.find_tensor("prompt_kernel.0.weight");
    if (!w) k.invalid("parakeet.prompt.present without tensor prompt_kernel.0.weight");
    hp.n_prompt_hidden = static_cast<int>(w->ne[1]);
    prompt_dictionary(k, "prompt.dictionary.keys", "prompt.dictionary.values", hp);
  }
  hp.sample_rate = k.u("preprocessor.sample_rate");
  hp.n_mels = k.u("preprocessor.n_mels");
  if (k.u("encoder.feat_in") != hp.n_mels) k.invalid("parakeet.encoder.feat_in differs from preprocessor.n_mels");
  hp.n_fft = k.u("preprocessor.n_fft");
  hp.hop_length = k.u("preprocessor.hop_length");
  hp.preemph = f.get_f32("parakeet.preprocessor.preemph");
  if (const float power = f.get_f32("parakeet.preprocessor.mag_power"); power != 2.0f)
    k.unsupported("preprocessor.mag_power", "= " + std::to_string(power));
  const std::string norm = f.get_string("parakeet.preprocessor.normalize");
  if (norm == "per_feature")
    hp.feature_norm = FeatureNorm::kPerFeature;
  else if (norm == "NA" || norm == "none" || norm == "None")
    hp.feature_norm = FeatureNorm::kNone;
  else
    k.unsupported("preprocessor.normalize", "= " + quoted(norm));
  hp.log_guard = f.get_f32("parakeet.preprocessor.log_zero_guard");
  hp.n_vocab = k.u("vocab_size");
  if (const auto blank = f.find_u32("parakeet.blank_id"); blank && static_cast<int>(*blank) != hp.n_vocab)
    k.unsupported("blank_id", "= " + std::to_string(*blank) + " (earshot's blank is vocab_size)");
  m.pieces = f.get_array<std::string>("parakeet.tokenizer.pieces");
  hp.n_pred_dim = k.u("decoder.pred_hidden");
  hp.n_pred_layers = k.u("decoder.pred_rnn_layers");
  if (k.u("joint.joint_hidden") != hp.n_pred_dim)
    k.unsupported("joint.joint_hidden", "= " + std::to_string(k.u("joint.joint_hidden")) +
                                            " (unlike decoder.pred_hidden " + std::to_string(hp.n_pred_dim) + ")");
  if (const std::string act = f.get_string("parakeet.joint.activation"); act != "relu")
    k.unsupported("joint.activation", "= " + quoted(act));
  hp.n_max_symbols = static_cast<int>(f.find_u32("parakeet.decoding.max_symbols").value_or(10));
  if (tdt) {
    for (int32_t d : f.get_array<int32_t>("parakeet.tdt.durations")) hp.durations.push_back(d);
    if (hp.durations.empty()) k.invalid("parakeet.tdt.durations is empty");
  }
}

std::vector<int64_t> squeezed(const std::array<int64_t, 4>& ne) {
  std::vector<int64_t> out;
  for (int64_t n : ne)
    if (n != 1) out.push_back(n);
  return out;
}

// Builds the translated tensor table, appending what changes.
class Translator {
 public:
  Translator(const GgufFile& f, PublishedLayout layout, const runtime::ByteSource& source, PublishedModel& m)
      : f_(f), layout_(layout), source_(source), m_(m), project_(runtime::project_name(layout)) {}

  void run() {
    for (const runtime::ExpectedTensor& t : expected_tensors(m_.hp, GGML_TYPE_F32)) {
      if (t.name.ends_with("num_batches_tracked")) continue;  // neither layout writes the counter
      if (t.name.find("dec_rnn.lstm.") != std::string::npos)
        lstm(t);
      else
        plain(t, name_of(t.name));
    }
    for (const GgufTensor& t : f_.tensors()) {
      if (used_.count(t.name) || ignored(t.name)) continue;
      if (t.name.ends_with(".bias") && (t.name.starts_with("encoder.layers.") || t.name.starts_with("enc.blocks.")))
        throw Error(ErrorCode::kUnsupported,
                    f_.label() + ": tensor " + t.name + " (linear biases: " +
                        (layout_ == PublishedLayout::kParakeetCpp ? "parakeet.encoder.use_bias" : "use_bias") +
                        ") in this " + project_ + " file is not computed by this build");
      throw Error(ErrorCode::kInvalidModel,
                  f_.label() + " (" + project_ + " layout): unexpected tensor '" + t.name + "'");
    }
    m_.appendix = std::make_shared<const std::vector<uint8_t>>(std::move(tail_));
  }

 private:
  std::string name_of(const std::string& ours) const {
    return layout_ == PublishedLayout::kTranscribeCppParakeet ? transcribe_cpp_name(ours) : ours;
  }
  bool ignored(const std::string& name) const {
    // parakeet.cpp: the featuriser tables (read apart) and a hybrid's CTC head (earshot runs its transducer head).
    return layout_ == PublishedLayout::kParakeetCpp &&
           (name == "preprocessor.featurizer.fb" || name == "preprocessor.featurizer.window" ||
            name.starts_with("ctc_decoder."));
  }
  const GgufTensor& need(const std::string& theirs, const std::string& ours) {
    const GgufTensor* t = theirs.empty() ? nullptr : f_.find_tensor(theirs);
    if (!t)
      throw Error(ErrorCode::kInvalidModel, f_.label() + " (" + project_ + " layout): tensor " +
                                                (theirs.empty() ? ours : theirs) + " (earshot's " + ours +
                                                ") is missing");
    used_.insert(theirs);
    return *t;
  }
  void check_shape(const GgufTensor& t, const runtime::ExpectedTensor& want) const {
    if (squeezed(t.ne) != squeezed(want.ne))
      throw Error(ErrorCode::kInvalidModel, f_.label() + " (" + project_ + " layout): tensor " + t.name +
                                                " has shape " + runtime::shape_string(t.n_dims, t.ne.data()) +
                                                ", expected " + runtime::shape_string(want.n_dims, want.ne.data()) +
                                                " (earshot's " + want.name + ")");
  }
  std::vector<uint8_t> bytes(const GgufTensor& t) const {
    std::vector<uint8_t> b(t.n_bytes);
    source_.read(t.offset, b.data(), b.size());
    return b;
  }
  std::vector<float> floats(const GgufTensor& t) const {
    const std::vector<uint8_t> b = bytes(t);
    std::vector<float> out(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    if (t.type == GGML_TYPE_F32) {
      std::memcpy(out.data(), b.data(), out.size() * 4);
    } else if (t.type == GGML_TYPE_F16 || t.type == GGML_TYPE_BF16) {
      ggml_get_type_traits(t.type)->to_float(b.data(), out.data(), static_cast<int64_t>(out.size()));
    } else {
      throw Error(ErrorCode::kInvalidModel, f_.label() + " (" + project_ + " layout): tensor " + t.name + " has type " +
                                                ggml_type_name(t.type) + ", expected f32 or f16");
    }
    return out;
  }
  void append(const std::string& ours, ggml_type type, const std::array<int64_t, 4>& ne, const void* data, size_t n) {
    while (tail_.size() % 32 != 0) tail_.push_back(0);
    m_.tensors[ours] = {type, ne, source_.size() + tail_.size()};
    tail_.insert(tail_.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
  }
  void plain(const runtime::ExpectedTensor& want, const std::string& theirs) {
    const GgufTensor& t = need(theirs, want.name);
    check_shape(t, want);
    if (t.type == GGML_TYPE_F32 || is_matrix_tensor(want.name)) {
      m_.tensors[want.name] = {t.type, want.ne, t.offset};  // the file's bytes, as they lie
      return;
    }
    const std::vector<float> v = floats(t);  // transcribe.cpp's f16 conv kernels: earshot keeps kernels f32
    append(want.name, GGML_TYPE_F32, want.ne, v.data(), v.size() * 4);
  }
  // PyTorch's gate blocks i, f, g, o -> earshot's i, f, o, c (c = g): rows of P elements each.
  static std::vector<uint8_t> reorder_gates(const std::vector<uint8_t>& b, size_t gate_bytes) {
    std::vector<uint8_t> out(b.size());
    const int order[4] = {0, 1, 3, 2};
    for (int g = 0; g < 4; ++g) std::memcpy(out.data() + g * gate_bytes, b.data() + order[g] * gate_bytes, gate_bytes);
    return out;
  }
  void lstm(const runtime::ExpectedTensor& want) {
    const std::string layer = want.name.substr(want.name.find_last_of('l') + 1);
    const bool bias = want.name.find("bias_h_l") != std::string::npos;
    if (!bias) {
      const GgufTensor& t = need(name_of(want.name), want.name);
      check_shape(t, want);
      const std::vector<uint8_t> b = reorder_gates(bytes(t), t.n_bytes / 4);
      append(want.name, t.type, want.ne, b.data(), b.size());
      return;
    }
    std::vector<float> sum;
    if (layout_ == PublishedLayout::kTranscribeCppParakeet) {
      const GgufTensor& t = need("pred.lstm." + layer + ".bias", want.name);  // bias_ih + bias_hh, summed
      check_shape(t, want);
      sum = floats(t);
    } else {
      const std::string l = "decoder.prediction.dec_rnn.lstm.";
      const GgufTensor& ih = need(l + "bias_ih_l" + layer, want.name);
      const GgufTensor& hh = need(l + "bias_hh_l" + layer, want.name);
      check_shape(ih, want), check_shape(hh, want);
      sum = floats(ih);
      const std::vector<float> b = floats(hh);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += b[i];
    }
    std::vector<uint8_t> raw(sum.size() * 4);
    std::memcpy(raw.data(), sum.data(), raw.size());
    const std::vector<uint8_t> b = reorder_gates(raw, raw.size() / 4);
    append(want.name, GGML_TYPE_F32, want.ne, b.data(), b.size());
  }

  const GgufFile& f_;
  PublishedLayout layout_;
  const runtime::ByteSource& source_;
  PublishedModel& m_;
  std::string project_;
  std::set<std::string> used_;
  std::vector<uint8_t> tail_;
};

}  // namespace

std::string transcribe_cpp_encoder_name(std::string_view n) {
  if (n.starts_with("encoder.pre_encode.")) return "enc." + std::string(n.substr(8));
  if (!n.starts_with("encoder.layers.")) return "";
  const size_t dot = n.find('.', 15);
  if (dot == std::string_view::npos) return "";
  const std::string_view layer = n.substr(15, dot - 15), rest = n.substr(dot + 1);
  for (const auto& [nemo, theirs] : kBlockPrefixes)
    if (rest.starts_with(nemo))
      return "enc.blocks." + std::string(layer) + "." + std::string(theirs) + std::string(rest.substr(nemo.size()));
  return "";
}

std::string transcribe_cpp_name(std::string_view n) {
  if (n.starts_with("encoder.")) return transcribe_cpp_encoder_name(n);
  if (n == "decoder.prediction.embed.weight") return "pred.embed.weight";
  constexpr std::string_view lstm = "decoder.prediction.dec_rnn.lstm.";
  if (n.starts_with(lstm)) {
    const std::string_view rest = n.substr(lstm.size());
    for (const auto& [nemo, theirs] : {std::pair<std::string_view, std::string_view>{"weight_ih_l", "Wx"},
                                       {"weight_hh_l", "Wh"},
                                       {"bias_h_l", "bias"}})
      if (rest.starts_with(nemo))
        return "pred.lstm." + std::string(rest.substr(nemo.size())) + "." + std::string(theirs);
    return "";
  }
  if (n.starts_with("joint.joint_net.2.")) return "joint.out." + std::string(n.substr(18));
  if (n.starts_with("joint.enc.") || n.starts_with("joint.pred.")) return std::string(n);
  if (n.starts_with("prompt_kernel.")) return "prompt.mlp." + std::string(n.substr(14));
  return "";
}

bool is_published_matrix_tensor(const std::string& name) {
  if (is_matrix_tensor(name)) return true;  // parakeet.cpp's names are NeMo's
  for (const char* suffix : {".Wx", ".Wh", "pred.embed.weight", "joint.out.weight", "conv.pointwise1.weight",
                             "conv.pointwise2.weight", "prompt.mlp.0.weight", "prompt.mlp.2.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

PublishedModel read_published_hparams(const GgufFile& f, PublishedLayout layout, const runtime::ByteSource& source) {
  PublishedModel m;
  if (layout == PublishedLayout::kTranscribeCppParakeet) {
    transcribe_cpp_hparams(f, m);
  } else if (layout == PublishedLayout::kParakeetCpp) {
    parakeet_cpp_hparams(f, m);
    const GgufTensor* fb = f.find_tensor("preprocessor.featurizer.fb");
    const GgufTensor* window = f.find_tensor("preprocessor.featurizer.window");
    if (!fb || !window || fb->type != GGML_TYPE_F32 || window->type != GGML_TYPE_F32 || fb->ne[2] != 1 ||
        fb->ne[3] != 1 || window->n_dims != 1)
      throw Error(ErrorCode::kInvalidModel, f.label() +
                                                " (parakeet.cpp layout): needs f32 tensors preprocessor.featurizer.fb "
                                                "[n_fft/2+1, n_mels, 1] and preprocessor.featurizer.window");
    if (fb->ne[0] != m.hp.n_fft / 2 + 1 || fb->ne[1] != m.hp.n_mels || window->ne[0] > (1 << 14))
      throw Error(ErrorCode::kInvalidModel, f.label() + " (parakeet.cpp layout): preprocessor.featurizer.fb is " +
                                                runtime::shape_string(fb->n_dims, fb->ne.data()) +
                                                ", unlike n_fft and n_mels");
    m.filters.resize(fb->ne[0] * fb->ne[1]);
    m.window.resize(window->ne[0]);
    source.read(fb->offset, m.filters.data(), m.filters.size() * 4);
    source.read(window->offset, m.window.data(), m.window.size() * 4);
  } else {
    throw Error(ErrorCode::kUnsupported, f.label() + " is not a published Parakeet transducer layout this build reads");
  }
  // Both projects compute the 8x dw_striding subsampling only, as earshot does.
  if (m.hp.subsampling_factor != 8)
    throw Error(ErrorCode::kUnsupported, f.label() + ": subsampling factor " + std::to_string(m.hp.subsampling_factor) +
                                             " in this " + std::string(runtime::project_name(layout)) +
                                             " file is not computed by this build");
  return m;
}

void translate_published_tensors(const GgufFile& f, PublishedLayout layout, const runtime::ByteSource& source,
                                 PublishedModel& m) {
  Translator(f, layout, source, m).run();
}

}  // namespace earshot::fastconformer

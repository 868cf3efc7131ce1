// Sortformer's Model::load: the hyper-parameters from GGUF keys, the tensor table
// checked against the encoder's and the diarizer's expected tensors, the weights
// placed once and handed to an encoder-only fastconformer::Model that the graphs
// share with the transducers' code.
#include "model/sortformer/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"
#include "model/runtime/weights.h"

namespace earshot::sortformer {
namespace {

[[noreturn]] void invalid(const std::string& label, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, label + ": " + message);
}

std::string key(const char* k) { return std::string(kGgufArchitecture) + "." + k; }

void check_range(const std::string& label, const std::string& name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    invalid(label, "hyper-parameter " + name + " = " + std::to_string(value) + " is outside [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + "]");
}

Hparams parse(const runtime::GgufFile& f, const std::string& label) {
  Hparams hp;
  fastconformer::Hparams& e = hp.encoder;
  auto u = [&](const char* k) { return f.get_count(key(k)); };
  e.n_vocab = 0;
  fastconformer::read_encoder_keys(f, kGgufArchitecture, label, e);
  const std::vector<int32_t> context = f.get_array<int32_t>(key("attention.context"));
  if (context.size() != 2) invalid(label, key("attention.context") + " must hold [left, right]");
  if (context[0] != -1 || context[1] != -1)
    throw Error(ErrorCode::kUnsupported, label + ": a limited encoder attention context [" +
                                             std::to_string(context[0]) + ", " + std::to_string(context[1]) +
                                             "] (Sortformer's encoder attends to the whole window)");
  const std::string fnorm = f.get_string(key("features.normalize"));
  if (fnorm != "none")
    throw Error(ErrorCode::kUnsupported,
                label + ": features.normalize '" + fnorm + "' (a streaming diarizer takes unnormalised features)");
  e.feature_norm = fastconformer::FeatureNorm::kNone;

  hp.n_speakers = u("speakers");
  hp.tf_d_model = u("transformer.embedding_length");
  hp.tf_n_layer = u("transformer.block_count");
  hp.tf_n_head = u("transformer.head_count");
  hp.tf_d_ff = u("transformer.feed_forward_length");
  hp.tf_eps = f.get_f32(key("transformer.layer_norm_epsilon"));
  if (f.get_string(key("transformer.activation")) != "relu")
    throw Error(ErrorCode::kUnsupported,
                label + ": transformer.activation '" + f.get_string(key("transformer.activation")) + "' (relu only)");
  if (f.get<bool>(key("transformer.pre_ln")))
    throw Error(ErrorCode::kUnsupported, label + ": a pre-LN transformer (transformer.pre_ln = true)");
  CacheParams& c = hp.cache;
  c.spkcache_len = u("cache.spkcache_len");
  c.fifo_len = u("cache.fifo_len");
  c.chunk_len = u("cache.chunk_len");
  c.update_period = u("cache.update_period");
  c.chunk_left_context = u("cache.chunk_left_context");
  c.chunk_right_context = u("cache.chunk_right_context");
  c.sil_frames_per_spk = u("cache.sil_frames_per_spk");
  c.pred_score_threshold = f.get_f32(key("cache.pred_score_threshold"));
  c.scores_boost_latest = f.get_f32(key("cache.scores_boost_latest"));
  c.sil_threshold = f.get_f32(key("cache.sil_threshold"));
  c.strong_boost_rate = f.get_f32(key("cache.strong_boost_rate"));
  c.weak_boost_rate = f.get_f32(key("cache.weak_boost_rate"));
  c.min_pos_scores_rate = f.get_f32(key("cache.min_pos_scores_rate"));
  c.async_streaming = f.find<bool>(key("cache.async_streaming")).value_or(false);

  check_range(label, "embedding_length", e.n_state, 2, 16384);
  check_range(label, "attention.head_count", e.n_head, 1, 256);
  check_range(label, "block_count", e.n_layer, 1, 256);
  check_range(label, "feed_forward_expansion", e.ff_expansion, 1, 16);
  check_range(label, "conv.kernel_size", e.n_conv_kernel, 1, 255);
  check_range(label, "subsampling.channels", e.n_sub_channels, 1, 4096);
  check_range(label, "features.n_mels", e.n_mels, 8, 512);
  check_range(label, "features.n_fft", e.n_fft, 16, 1 << 14);
  check_range(label, "speakers", hp.n_speakers, 1, 4);
  check_range(label, "transformer.embedding_length", hp.tf_d_model, 1, 16384);
  check_range(label, "transformer.block_count", hp.tf_n_layer, 1, 256);
  check_range(label, "transformer.head_count", hp.tf_n_head, 1, 256);
  check_range(label, "transformer.feed_forward_length", hp.tf_d_ff, 1, 65536);
  check_range(label, "cache.spkcache_len", c.spkcache_len, 1, 1 << 16);
  check_range(label, "cache.sil_frames_per_spk", c.sil_frames_per_spk, 0, 1 << 10);
  if (e.n_state % e.n_head != 0 || e.d_head() % 2 != 0)
    invalid(label, "embedding_length " + std::to_string(e.n_state) + " is not an even head size times " +
                       std::to_string(e.n_head) + " heads");
  if (hp.tf_d_model % hp.tf_n_head != 0)
    invalid(label, "transformer.embedding_length " + std::to_string(hp.tf_d_model) + " is not a multiple of " +
                       std::to_string(hp.tf_n_head) + " heads");
  if (e.n_conv_kernel % 2 == 0) invalid(label, "conv.kernel_size " + std::to_string(e.n_conv_kernel) + " is even");
  if ((e.n_fft & (e.n_fft - 1)) != 0)
    invalid(label, "features.n_fft " + std::to_string(e.n_fft) + " is not a power of two");
  return hp;
}

runtime::ExpectedTensor expected(std::string name, std::initializer_list<int64_t> ne, ggml_type type) {
  runtime::ExpectedTensor t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  std::copy(ne.begin(), ne.end(), t.ne.begin());
  return t;
}

}  // namespace

double Hparams::frame_seconds() const {
  return static_cast<double>(encoder.hop_length) * encoder.subsampling_factor / encoder.sample_rate;
}

bool is_matrix_tensor(const std::string& name) {
  if (name.starts_with("encoder.")) return fastconformer::is_matrix_tensor(name);
  return name.ends_with(".weight") && name.find("norm") == std::string::npos;
}

std::vector<runtime::ExpectedTensor> expected_diarizer_tensors(const Hparams& hp, ggml_type matrix_type) {
  std::vector<runtime::ExpectedTensor> out;
  auto add = [&](std::string name, std::initializer_list<int64_t> ne) {
    const ggml_type type = is_matrix_tensor(name) ? matrix_type : GGML_TYPE_F32;
    out.push_back(expected(std::move(name), ne, type));
  };
  const int64_t d_enc = hp.encoder.n_state, d = hp.tf_d_model, ff = hp.tf_d_ff, S = hp.n_speakers;
  if (d_enc != d) {
    add("sortformer.encoder_proj.weight", {d_enc, d});
    add("sortformer.encoder_proj.bias", {d});
  }
  for (int i = 0; i < hp.tf_n_layer; ++i) {
    const std::string l = "transformer." + std::to_string(i) + ".";
    for (const char* net : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      add(l + net + ".weight", {d, d});
      add(l + net + ".bias", {d});
    }
    add(l + "norm_1.weight", {d});
    add(l + "norm_1.bias", {d});
    add(l + "ffn_in.weight", {d, ff});
    add(l + "ffn_in.bias", {ff});
    add(l + "ffn_out.weight", {ff, d});
    add(l + "ffn_out.bias", {d});
    add(l + "norm_2.weight", {d});
    add(l + "norm_2.bias", {d});
  }
  add("sortformer.hidden.weight", {d, d});
  add("sortformer.hidden.bias", {d});
  add("sortformer.speakers.weight", {d, S});
  add("sortformer.speakers.bias", {S});
  return out;
}

struct ModelLoader {
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, ggml_backend_dev_t device) {
    const runtime::GgufFile file = runtime::GgufFile::open(path);
    const std::string label = file.label();
    if (file.has("stt.sortformer.encoder.d_model")) return load_transcribe_cpp(file, path, device);
    if (file.architecture() != kGgufArchitecture)
      invalid(label, "architecture '" + file.architecture() + "', expected '" + kGgufArchitecture + "'");
    Hparams hp = parse(file, label);
    fastconformer::check_encoder_supported(hp.encoder, label);

    std::vector<runtime::ExpectedTensor> want = fastconformer::expected_encoder_tensors(hp.encoder, GGML_TYPE_F32);
    std::erase_if(want, [](const runtime::ExpectedTensor& t) { return t.name.ends_with("num_batches_tracked"); });
    for (runtime::ExpectedTensor& t : expected_diarizer_tensors(hp, GGML_TYPE_F32)) want.push_back(std::move(t));
    const int64_t n_bins = hp.encoder.n_fft / 2 + 1;
    want.push_back(expected("preprocessor.featurizer.fb", {n_bins, hp.encoder.n_mels}, GGML_TYPE_F32));
    // A matrix takes the type its file gives it (f32, f16, bf16 or quantised); the rest is f32.
    for (runtime::ExpectedTensor& t : want) {
      const runtime::GgufTensor* in_file = file.find_tensor(t.name);
      if (!in_file || !is_matrix_tensor(t.name)) continue;
      const ggml_type type = in_file->type;
      if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16 && !ggml_is_quantized(type))
        invalid(label,
                "tensor " + t.name + " has type " + ggml_type_name(type) + ", expected a float or quantised type");
      t.type = type;
    }
    const runtime::GgufTensor* window = file.find_tensor("preprocessor.featurizer.window");
    if (!window || window->type != GGML_TYPE_F32 || window->n_dims != 1 || window->ne[0] < 2 ||
        window->ne[0] > hp.encoder.n_fft)
      invalid(label, "needs an f32 tensor preprocessor.featurizer.window of 2 to n_fft samples");
    want.push_back(expected("preprocessor.featurizer.window", {window->ne[0]}, GGML_TYPE_F32));

    const std::vector<runtime::TensorPlacement> placements = runtime::place_gguf_tensors(file, want);
    runtime::ModelWeights weights =
        runtime::ModelWeights::load(runtime::ByteSource::file(path), placements, device, label);

    auto floats = [&](const char* name) {
      const ggml_tensor* t = weights.find(name);
      std::vector<float> v(ggml_nelements(t));
      ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
      return v;
    };
    std::vector<float> filters = floats("preprocessor.featurizer.fb"),
                       window_values = floats("preprocessor.featurizer.window");
    return build(std::move(hp), std::move(weights), std::move(filters), std::move(window_values), device, label);
  }

  // transcribe.cpp's layout (docs/sortformer-gguf.md): its keys, its names for the same tensors (some with
  // NeMo's size-1 dimensions kept: the bytes are the same), no featuriser buffers.
  static std::shared_ptr<const Model> load_transcribe_cpp(const runtime::GgufFile& file,
                                                          const std::filesystem::path& path, ggml_backend_dev_t device);

  static std::shared_ptr<const Model> build(Hparams hp, runtime::ModelWeights weights, std::vector<float> filters,
                                            std::vector<float> window, ggml_backend_dev_t device,
                                            const std::string& label) {
    auto model = std::make_shared<Model>();
    model->filters_ = std::move(filters);
    model->window_ = std::move(window);
    model->hparams_ = std::move(hp);
    model->encoder_ = fastconformer::Model::encoder_only(model->hparams_.encoder, std::move(weights), device, label);
    wire(*model);
    return model;
  }

  static void wire(Model& m) {
    const runtime::ModelWeights& w = m.encoder_->weights();
    auto get = [&](const std::string& name) { return w.find(name); };
    const Hparams& hp = m.hparams_;
    m.proj_w = get("sortformer.encoder_proj.weight");
    m.proj_b = get("sortformer.encoder_proj.bias");
    for (int i = 0; i < hp.tf_n_layer; ++i) {
      const std::string l = "transformer." + std::to_string(i) + ".";
      TransformerLayer y;
      y.q_w = get(l + "attn_q.weight"), y.q_b = get(l + "attn_q.bias");
      y.k_w = get(l + "attn_k.weight"), y.k_b = get(l + "attn_k.bias");
      y.v_w = get(l + "attn_v.weight"), y.v_b = get(l + "attn_v.bias");
      y.out_w = get(l + "attn_out.weight"), y.out_b = get(l + "attn_out.bias");
      y.ln1_w = get(l + "norm_1.weight"), y.ln1_b = get(l + "norm_1.bias");
      y.ff_in_w = get(l + "ffn_in.weight"), y.ff_in_b = get(l + "ffn_in.bias");
      y.ff_out_w = get(l + "ffn_out.weight"), y.ff_out_b = get(l + "ffn_out.bias");
      y.ln2_w = get(l + "norm_2.weight"), y.ln2_b = get(l + "norm_2.bias");
      m.layers.push_back(y);
    }
    m.head_hidden_w = get("sortformer.hidden.weight");
    m.head_hidden_b = get("sortformer.hidden.bias");
    m.head_out_w = get("sortformer.speakers.weight");
    m.head_out_b = get("sortformer.speakers.bias");
  }
};

std::shared_ptr<const Model> ModelLoader::load_transcribe_cpp(const runtime::GgufFile& f,
                                                              const std::filesystem::path& path,
                                                              ggml_backend_dev_t device) {
  const std::string label = f.label();
  auto u = [&](const std::string& k) { return f.get_count(k); };
  const std::string s = "stt.sortformer.", fe = "stt.frontend.";
  Hparams hp;
  fastconformer::Hparams& e = hp.encoder;
  e.n_vocab = 0;
  e.n_audio_ctx = f.has(s + "encoder.pos_emb_max_len") ? u(s + "encoder.pos_emb_max_len") : 5000;
  e.n_state = u(s + "encoder.d_model");
  e.n_head = u(s + "encoder.n_heads");
  e.n_layer = u(s + "encoder.n_layers");
  const int d_ff = u(s + "encoder.d_ff");
  if (e.n_state < 1 || d_ff % e.n_state != 0)
    invalid(label, s + "encoder.d_ff " + std::to_string(d_ff) + " is not a multiple of d_model");
  e.ff_expansion = d_ff / e.n_state;
  e.n_conv_kernel = u(s + "encoder.conv_kernel");
  const std::string norm = f.get_string(s + "encoder.conv_norm_type");
  if (norm != "batch_norm")
    throw Error(ErrorCode::kUnsupported, label + ": encoder.conv_norm_type '" + norm + "' (batch_norm only)");
  e.subsampling_factor = u(s + "encoder.subsampling_factor");
  e.n_sub_channels = u(s + "encoder.subsampling_channels");
  // What its converter does not write is the NEST encoder's (NeMo's config): dw_striding
  // subsampling, xscaling, biases, full attention, symmetric convs, LayerNorm eps 1e-5.
  e.xscaling = true;
  e.bias = true;
  e.n_mels = u(fe + "num_mels");
  if (u(s + "encoder.feat_in") != e.n_mels) invalid(label, "encoder.feat_in differs from " + fe + "num_mels");
  e.n_fft = u(fe + "n_fft");
  e.hop_length = u(fe + "hop_length");
  e.sample_rate = u(fe + "sample_rate");
  e.preemph = f.get_f32(fe + "pre_emphasis");
  const std::string fnorm = f.get_string(fe + "normalize");
  if (fnorm != "none")
    throw Error(ErrorCode::kUnsupported, label + ": " + fe + "normalize '" + fnorm + "' (none only)");
  if (f.get_string(fe + "window") != "hann")
    throw Error(ErrorCode::kUnsupported,
                label + ": " + fe + "window '" + f.get_string(fe + "window") + "' (hann only)");
  const int win_length = u(fe + "win_length");
  hp.n_speakers = u(s + "max_speakers");
  hp.tf_d_model = u(s + "transformer.d_model");
  hp.tf_n_layer = u(s + "transformer.n_layers");
  hp.tf_n_head = u(s + "transformer.n_heads");
  hp.tf_d_ff = u(s + "transformer.d_ff");
  if (f.get_string(s + "transformer.activation") != "relu" || f.get<bool>(s + "transformer.pre_ln"))
    throw Error(ErrorCode::kUnsupported, label + ": a transformer other than post-LN with ReLU");
  hp.cache.chunk_len = u(s + "stream.chunk_len");
  hp.cache.spkcache_len = u(s + "stream.spkcache_len");
  hp.cache.fifo_len = u(s + "stream.fifo_len");
  hp.cache.update_period = u(s + "stream.spkcache_update_period");
  if (hp.n_speakers < 1 || hp.n_speakers > 4 || e.n_head < 1 || e.n_state % e.n_head != 0 || hp.tf_n_head < 1 ||
      hp.tf_d_model % hp.tf_n_head != 0 || e.n_mels < 8 || win_length < 2 || win_length > e.n_fft)
    invalid(label, "inconsistent stt.sortformer.* dimensions");
  fastconformer::check_encoder_supported(e, label);

  std::vector<runtime::ExpectedTensor> want = fastconformer::expected_encoder_tensors(e, GGML_TYPE_F32);
  std::erase_if(want, [](const runtime::ExpectedTensor& t) { return t.name.ends_with("num_batches_tracked"); });
  for (runtime::ExpectedTensor& t : expected_diarizer_tensors(hp, GGML_TYPE_F32)) want.push_back(std::move(t));
  auto squeezed = [](const std::array<int64_t, 4>& ne) {
    std::vector<int64_t> v;
    for (int64_t n : ne)
      if (n != 1) v.push_back(n);
    return v;
  };
  std::vector<runtime::TensorPlacement> placements;
  std::unordered_set<std::string> used;
  for (runtime::ExpectedTensor& t : want) {
    const std::string theirs = transcribe_cpp_name(t.name);
    const runtime::GgufTensor* in = f.find_tensor(theirs);
    if (!in) invalid(label, "tensor " + theirs + " (earshot's " + t.name + ") is missing");
    if (squeezed(in->ne) != squeezed(t.ne))
      invalid(label, "tensor " + theirs + " has shape " +
                         runtime::shape_string(std::max(in->n_dims, 1), in->ne.data()) + ", expected " +
                         runtime::shape_string(t.n_dims, t.ne.data()));
    const bool matrix = is_matrix_tensor(t.name);
    if (matrix ? !(in->type == GGML_TYPE_F32 || in->type == GGML_TYPE_F16 || in->type == GGML_TYPE_BF16 ||
                   ggml_is_quantized(in->type))
               : in->type != GGML_TYPE_F32)
      throw Error(ErrorCode::kUnsupported, label + ": tensor " + theirs + " has type " + ggml_type_name(in->type) +
                                               (matrix ? "" : " (earshot computes it in f32 only)"));
    if (t.ne[0] % ggml_blck_size(in->type) != 0)
      invalid(label, "tensor " + theirs + ": rows are not whole " + ggml_type_name(in->type) + " blocks");
    t.type = in->type;
    placements.push_back({t, in->offset});
    used.insert(theirs);
  }
  for (const runtime::GgufTensor& t : f.tensors())
    if (!used.contains(t.name) && !t.name.starts_with("diar.spk_head."))  // the unused two-input head
      invalid(label, "unexpected tensor '" + t.name + "'");
  runtime::ModelWeights weights =
      runtime::ModelWeights::load(runtime::ByteSource::file(path), placements, device, label);
  return build(std::move(hp), std::move(weights), slaney_filters(e.n_mels, e.n_fft, e.sample_rate),
               hann_window(win_length), device, label);
}

std::string transcribe_cpp_name(const std::string& n) {
  static const std::pair<const char*, const char*> kBlock[] = {{"norm_feed_forward1.", "norm_ff1."},
                                                               {"feed_forward1.", "ff1."},
                                                               {"norm_self_att.", "norm_attn."},
                                                               {"self_attn.", "attn."},
                                                               {"conv.pointwise_conv1.", "conv.pointwise1."},
                                                               {"conv.depthwise_conv.", "conv.depthwise."},
                                                               {"conv.batch_norm.", "conv.bn."},
                                                               {"conv.pointwise_conv2.", "conv.pointwise2."},
                                                               {"norm_feed_forward2.", "norm_ff2."},
                                                               {"feed_forward2.", "ff2."},
                                                               {"norm_conv.", "norm_conv."},
                                                               {"norm_out.", "norm_out."}};
  static const std::pair<const char*, const char*> kTransformer[] = {
      {"attn_q.", "attn.q."}, {"attn_k.", "attn.k."},  {"attn_v.", "attn.v."}, {"attn_out.", "attn.out."},
      {"ffn_in.", "ff.in."},  {"ffn_out.", "ff.out."}, {"norm_1.", "norm_1."}, {"norm_2.", "norm_2."}};
  auto layer_rest = [](const std::string& s, size_t at, std::string& layer) {
    const size_t dot = s.find('.', at);
    layer = s.substr(at, dot - at);
    return s.substr(dot + 1);
  };
  std::string layer;
  if (n.starts_with("encoder.pre_encode.")) return "enc." + n.substr(8);
  if (n.starts_with("encoder.layers.")) {
    const std::string rest = layer_rest(n, 15, layer);
    for (const auto& [ours, theirs] : kBlock)
      if (rest.starts_with(ours)) return "enc.blocks." + layer + "." + theirs + rest.substr(std::strlen(ours));
  }
  if (n.starts_with("transformer.")) {
    const std::string rest = layer_rest(n, 12, layer);
    for (const auto& [ours, theirs] : kTransformer)
      if (rest.starts_with(ours)) return "tf.blocks." + layer + "." + theirs + rest.substr(std::strlen(ours));
  }
  if (n.starts_with("sortformer.encoder_proj.")) return "diar." + n.substr(11);
  if (n.starts_with("sortformer.hidden.")) return "diar.fc1." + n.substr(18);
  if (n.starts_with("sortformer.speakers.")) return "diar.single_spk_head." + n.substr(20);
  return n;
}

std::vector<float> slaney_filters(int n_mels, int n_fft, int sr) {
  const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp, step = std::log(6.4) / 27.0;
  auto hz_to_mel = [&](double f) { return f < min_log_hz ? f / f_sp : min_log_mel + std::log(f / min_log_hz) / step; };
  auto mel_to_hz = [&](double m) {
    return m < min_log_mel ? m * f_sp : min_log_hz * std::exp(step * (m - min_log_mel));
  };
  const double lo = hz_to_mel(0), hi = hz_to_mel(sr / 2.0);
  std::vector<double> points(n_mels + 2);
  for (int i = 0; i < n_mels + 2; ++i) points[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));
  const int n_bins = n_fft / 2 + 1;
  std::vector<float> fb(static_cast<size_t>(n_mels) * n_bins);
  for (int m = 0; m < n_mels; ++m)
    for (int b = 0; b < n_bins; ++b) {
      const double f = static_cast<double>(b) * sr / n_fft;
      const double up = (f - points[m]) / (points[m + 1] - points[m]);
      const double down = (points[m + 2] - f) / (points[m + 2] - points[m + 1]);
      fb[static_cast<size_t>(m) * n_bins + b] =
          static_cast<float>(std::max(0.0, std::min(up, down)) * 2.0 / (points[m + 2] - points[m]));
    }
  return fb;
}

std::vector<float> hann_window(int n) {
  std::vector<float> w(n);
  for (int i = 0; i < n; ++i) w[i] = static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * i / (n - 1)));
  return w;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path, ggml_backend_dev_t device) {
  return ModelLoader::load(path, device);
}

}  // namespace earshot::sortformer

#include "model/sortformer/random_model.h"

#include <cmath>
#include <random>

#include "model/runtime/gguf_file.h"
#include "model/sortformer/model.h"

namespace earshot::sortformer {

namespace {

// A residual branch's last projection: what the branch adds to the stream.
bool is_residual_output(const std::string& name) {
  for (const char* end : {".feed_forward1.linear2.", ".feed_forward2.linear2.", ".self_attn.linear_out.",
                          ".conv.pointwise_conv2.", ".attn_out.", ".ffn_out."})
    if (name.find(end) != std::string::npos) return true;
  return false;
}

}  // namespace

void write_random_model(const std::filesystem::path& path, const RandomModelOptions& o) {
  Hparams hp;
  fastconformer::Hparams& e = hp.encoder;
  e.n_mels = o.real ? 128 : 32;
  e.n_state = o.real ? 512 : 64;
  e.n_head = o.real ? 8 : 4;
  e.n_layer = o.real ? 17 : 2;
  e.n_sub_channels = o.real ? 256 : 16;
  e.n_conv_kernel = 9;
  e.n_fft = 512;
  e.bias = true;
  e.xscaling = true;
  hp.tf_d_model = o.real ? 192 : 32;
  hp.tf_n_layer = o.real ? 18 : 2;
  hp.tf_n_head = o.real ? 8 : 4;
  hp.tf_d_ff = o.real ? 768 : 64;
  hp.n_speakers = o.speakers;

  runtime::GgufWriter w;
  w.set_architecture(kGgufArchitecture);
  auto key = [](const char* k) { return std::string(kGgufArchitecture) + "." + k; };
  auto u32 = [&](const char* k, int v) { w.set<uint32_t>(key(k), static_cast<uint32_t>(v)); };
  auto f32 = [&](const char* k, float v) { w.set<float>(key(k), v); };
  u32("audio_ctx", 5000);
  u32("embedding_length", e.n_state);
  u32("attention.head_count", e.n_head);
  u32("block_count", e.n_layer);
  u32("feed_forward_expansion", 4);
  f32("attention.layer_norm_epsilon", 1e-5f);
  u32("conv.kernel_size", e.n_conv_kernel);
  w.set(key("conv.norm"), "batch_norm");
  w.set(key("conv.causal"), false);
  w.set(key("subsampling.kind"), "dw_striding");
  u32("subsampling.factor", 8);
  u32("subsampling.channels", e.n_sub_channels);
  w.set(key("subsampling.causal"), false);
  w.set(key("xscaling"), true);
  w.set(key("bias"), true);
  const int32_t context[2] = {-1, -1};
  w.set_array<int32_t>(key("attention.context"), context);
  w.set(key("attention.context_style"), "regular");
  u32("features.n_mels", e.n_mels);
  u32("features.n_fft", 512);
  u32("features.hop_length", 160);
  u32("features.sample_rate", 16000);
  f32("features.preemphasis", 0.97f);
  f32("features.log_guard", 5.960464477539063e-08f);
  w.set(key("features.normalize"), "none");
  u32("speakers", hp.n_speakers);
  u32("transformer.embedding_length", hp.tf_d_model);
  u32("transformer.block_count", hp.tf_n_layer);
  u32("transformer.head_count", hp.tf_n_head);
  u32("transformer.feed_forward_length", hp.tf_d_ff);
  f32("transformer.layer_norm_epsilon", 1e-5f);
  w.set(key("transformer.activation"), "relu");
  w.set(key("transformer.pre_ln"), false);
  const CacheParams c;
  u32("cache.spkcache_len", c.spkcache_len);
  u32("cache.fifo_len", c.fifo_len);
  u32("cache.chunk_len", c.chunk_len);
  u32("cache.update_period", c.update_period);
  u32("cache.chunk_left_context", c.chunk_left_context);
  u32("cache.chunk_right_context", c.chunk_right_context);
  u32("cache.sil_frames_per_spk", c.sil_frames_per_spk);
  f32("cache.pred_score_threshold", c.pred_score_threshold);
  f32("cache.scores_boost_latest", c.scores_boost_latest);
  f32("cache.sil_threshold", c.sil_threshold);
  f32("cache.strong_boost_rate", c.strong_boost_rate);
  f32("cache.weak_boost_rate", c.weak_boost_rate);
  f32("cache.min_pos_scores_rate", c.min_pos_scores_rate);

  const float residual_scale = std::isnan(o.residual_scale) ? (o.real ? kRealResidualScale : 1.0f) : o.residual_scale;
  std::mt19937 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  std::vector<runtime::ExpectedTensor> tensors = fastconformer::expected_encoder_tensors(e, o.matrix_type);
  std::erase_if(tensors, [](const runtime::ExpectedTensor& t) { return t.name.ends_with("num_batches_tracked"); });
  for (runtime::ExpectedTensor& t : expected_diarizer_tensors(hp, o.matrix_type)) tensors.push_back(std::move(t));
  for (const runtime::ExpectedTensor& t : tensors) {
    const size_t n = static_cast<size_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    std::vector<float> v(n);
    const std::string& name = t.name;
    const bool gain = name.find("norm") != std::string::npos && name.ends_with(".weight");
    for (size_t i = 0; i < n; ++i) {
      if (name.ends_with("running_var"))
        v[i] = uniform(rng);
      else if (gain)
        v[i] = 1.0f + 0.1f * normal(rng);
      else if (name.ends_with(".bias") || name.ends_with("running_mean") || name.ends_with("pos_bias_u") ||
               name.ends_with("pos_bias_v"))
        v[i] = 0.1f * normal(rng);
      else  // a matrix or a conv kernel: 1/sqrt(fan_in), the fan-in being ne[0] x ne[1] for the 3x3 convs
        v[i] = normal(rng) / std::sqrt(static_cast<float>(t.ne[0] * (t.n_dims == 4 ? t.ne[1] * t.ne[2] : 1)));
    }
    if (is_residual_output(name))
      for (float& x : v) x *= residual_scale;
    w.add_tensor_f32(name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims), v);
  }
  const std::vector<float> fb = slaney_filters(e.n_mels, 512, 16000);
  const int64_t fb_ne[2] = {257, e.n_mels};
  w.add_tensor_f32("preprocessor.featurizer.fb", GGML_TYPE_F32, fb_ne, fb);
  const std::vector<float> window = hann_window(400);
  const int64_t window_ne[1] = {400};
  w.add_tensor_f32("preprocessor.featurizer.window", GGML_TYPE_F32, window_ne, window);
  w.write(path);
}

}  // namespace earshot::sortformer

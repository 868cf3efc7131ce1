#include "model/fastconformer/model_writer.h"

#include <cstdio>
#include <fstream>

#include "common/error.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/model_file.h"

namespace earshot::fastconformer {
namespace {

class Out {
 public:
  explicit Out(const std::filesystem::path& path) : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
    if (!out_) throw Error(ErrorCode::kIo, "cannot write " + path.string());
  }
  void i32(int32_t v) { bytes(&v, 4); }
  void bytes(const void* p, size_t n) { out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); }
  void close() {
    out_.close();
    if (!out_) throw Error(ErrorCode::kIo, "cannot write " + path_.string());
  }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

std::string key(const char* k) { return std::string(kGgufArchitecture) + "." + k; }

}  // namespace

void write_legacy(const std::filesystem::path& path, const ModelData& m) {
  const Hparams& hp = m.hparams;
  // whisper.cpp's format fixes every flag to Parakeet-TDT's: a file that says otherwise would lie.
  if (hp.causal_subsampling || hp.causal_conv || hp.conv_norm != ConvNorm::kBatchNorm || hp.att_left != -1 ||
      hp.att_right != -1 || hp.xscaling || hp.bias || hp.feature_norm != FeatureNorm::kPerFeature || hp.n_prompts != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "the legacy Parakeet format holds Parakeet-TDT's flags only; write this model as GGUF");
  Out out(path);
  out.i32(static_cast<int32_t>(runtime::kGgmlMagic));
  const bool f16 = !m.tensors.empty() && m.tensors[0].type == GGML_TYPE_F16;
  for (int v : {hp.n_vocab, hp.n_audio_ctx, hp.n_state, hp.n_head, hp.n_layer, hp.n_mels, f16 ? 1 : 0, hp.n_fft,
                hp.subsampling_factor, hp.n_sub_channels, hp.n_conv_kernel, hp.n_pred_dim, hp.n_pred_layers,
                static_cast<int>(hp.durations.size()), hp.n_max_symbols})
    out.i32(v);
  out.i32(hp.n_mels);
  out.i32(hp.n_fft / 2 + 1);
  out.bytes(m.mel_filters.data(), m.mel_filters.size() * 4);
  out.i32(static_cast<int32_t>(m.window.size()));
  out.bytes(m.window.data(), m.window.size() * 4);
  for (int d : hp.durations) out.i32(d);
  out.i32(static_cast<int32_t>(m.pieces.size()));
  for (const std::string& p : m.pieces) {
    out.i32(static_cast<int32_t>(p.size()));
    out.bytes(p.data(), p.size());
  }
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const runtime::ExpectedTensor& t = m.tensors[i];
    const std::vector<float>& v = m.values[i];
    out.i32(t.n_dims);
    out.i32(static_cast<int32_t>(t.name.size()));
    out.i32(static_cast<int32_t>(t.type));
    for (int d = 0; d < t.n_dims; ++d) out.i32(static_cast<int32_t>(t.ne[d]));
    out.bytes(t.name.data(), t.name.size());
    if (t.type == GGML_TYPE_F32) {
      out.bytes(v.data(), v.size() * 4);
    } else if (t.type == GGML_TYPE_F16) {
      std::vector<ggml_fp16_t> h(v.size());
      ggml_fp32_to_fp16_row(v.data(), h.data(), static_cast<int64_t>(v.size()));
      out.bytes(h.data(), h.size() * 2);
    } else if (t.type == GGML_TYPE_I32) {
      std::vector<int32_t> n(v.begin(), v.end());
      out.bytes(n.data(), n.size() * 4);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("the legacy writer takes f32 and f16 only, not ") + ggml_type_name(t.type));
    }
  }
  out.close();
}

void write_gguf(const std::filesystem::path& path, const ModelData& m) {
  const Hparams& hp = m.hparams;
  runtime::GgufWriter w;
  w.set_architecture(kGgufArchitecture);
  auto u = [&](const char* k, int v) { w.set(key(k), static_cast<uint32_t>(v)); };
  u("vocab_size", hp.n_vocab);
  u("audio_ctx", hp.n_audio_ctx);
  u("embedding_length", hp.n_state);
  u("attention.head_count", hp.n_head);
  u("block_count", hp.n_layer);
  u("feed_forward_expansion", hp.ff_expansion);
  w.set(key("attention.layer_norm_epsilon"), hp.eps);
  const std::vector<int32_t> context = {hp.att_left, hp.att_right};
  w.set_array<int32_t>(key("attention.context"), context);
  w.set(key("attention.context_style"),
        hp.att_style == AttentionStyle::kChunkedLimited ? "chunked_limited" : "regular");
  if (!hp.att_right_options.empty()) {
    const std::vector<int32_t> options(hp.att_right_options.begin(), hp.att_right_options.end());
    w.set_array<int32_t>(key("attention.right_contexts"), options);
  }
  u("conv.kernel_size", hp.n_conv_kernel);
  w.set(key("conv.norm"), hp.conv_norm == ConvNorm::kBatchNorm ? "batch_norm" : "layer_norm");
  w.set(key("conv.causal"), hp.causal_conv);
  w.set(key("subsampling.kind"), hp.subsampling);
  u("subsampling.factor", hp.subsampling_factor);
  u("subsampling.channels", hp.n_sub_channels);
  w.set(key("subsampling.causal"), hp.causal_subsampling);
  w.set(key("xscaling"), hp.xscaling);
  w.set(key("bias"), hp.bias);
  u("prediction.embedding_length", hp.n_pred_dim);
  u("prediction.block_count", hp.n_pred_layers);
  u("decoding.max_symbols", hp.n_max_symbols);
  w.set(key("decoder.kind"), hp.durations.empty() ? "rnnt" : "tdt");
  if (!hp.durations.empty()) {
    const std::vector<uint32_t> durations(hp.durations.begin(), hp.durations.end());
    w.set_array<uint32_t>(key("decoder.durations"), durations);
  }
  u("features.n_mels", hp.n_mels);
  u("features.n_fft", hp.n_fft);
  u("features.hop_length", hp.hop_length);
  u("features.sample_rate", hp.sample_rate);
  w.set(key("features.preemphasis"), hp.preemph);
  w.set(key("features.log_guard"), hp.log_guard);
  w.set(key("features.normalize"), hp.feature_norm == FeatureNorm::kPerFeature ? "per_feature" : "none");
  if (hp.n_prompts > 0) {
    u("prompt.size", hp.n_prompts);
    u("prompt.hidden", hp.n_prompt_hidden);
    std::vector<std::string> languages;
    std::vector<uint32_t> slots;
    for (const auto& [language, slot] : hp.prompt_dictionary) {
      languages.push_back(language);
      slots.push_back(static_cast<uint32_t>(slot));
    }
    w.set_array<std::string>(key("prompt.languages"), languages);
    w.set_array<uint32_t>(key("prompt.slots"), slots);
  }
  w.set_array<std::string>("tokenizer.pieces", m.pieces);
  const int64_t fb_ne[2] = {hp.n_fft / 2 + 1, hp.n_mels};
  w.add_tensor_f32("preprocessor.featurizer.fb", GGML_TYPE_F32, fb_ne, m.mel_filters);
  const int64_t window_ne[1] = {static_cast<int64_t>(m.window.size())};
  w.add_tensor_f32("preprocessor.featurizer.window", GGML_TYPE_F32, window_ne, m.window);
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const runtime::ExpectedTensor& t = m.tensors[i];
    if (t.name.ends_with("num_batches_tracked")) continue;  // a training counter; GGUF leaves it out
    w.add_tensor_f32(t.name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims), m.values[i]);
  }
  w.write(path);
}

}  // namespace earshot::fastconformer

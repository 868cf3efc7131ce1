// A loaded Whisper model: hyper-parameters, mel filters, vocabulary and weights
// in ggml tensors. Immutable once loaded and shared by every session; all
// per-stream state (encoder output, KV caches, compute buffers) lives in a
// session object (see session.h).
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/runtime/weights.h"
#include "model/whisper/alignment_heads.h"
#include "model/whisper/hparams.h"

namespace earshot::whisper {

struct EncoderLayer {
  ggml_tensor* attn_ln_w = nullptr;  // encoder.blocks.N.attn_ln.weight
  ggml_tensor* attn_ln_b = nullptr;
  ggml_tensor* attn_q_w = nullptr;  // attn.query
  ggml_tensor* attn_q_b = nullptr;
  ggml_tensor* attn_k_w = nullptr;  // attn.key (no bias in Whisper)
  ggml_tensor* attn_v_w = nullptr;  // attn.value
  ggml_tensor* attn_v_b = nullptr;
  ggml_tensor* attn_out_w = nullptr;  // attn.out
  ggml_tensor* attn_out_b = nullptr;
  ggml_tensor* mlp_ln_w = nullptr;  // mlp_ln
  ggml_tensor* mlp_ln_b = nullptr;
  ggml_tensor* mlp_0_w = nullptr;  // mlp.0
  ggml_tensor* mlp_0_b = nullptr;
  ggml_tensor* mlp_1_w = nullptr;  // mlp.2
  ggml_tensor* mlp_1_b = nullptr;
};

struct DecoderLayer {
  ggml_tensor* attn_ln_w = nullptr;  // decoder.blocks.N.attn_ln.weight
  ggml_tensor* attn_ln_b = nullptr;
  ggml_tensor* attn_q_w = nullptr;
  ggml_tensor* attn_q_b = nullptr;
  ggml_tensor* attn_k_w = nullptr;
  ggml_tensor* attn_v_w = nullptr;
  ggml_tensor* attn_v_b = nullptr;
  ggml_tensor* attn_out_w = nullptr;
  ggml_tensor* attn_out_b = nullptr;
  ggml_tensor* cross_ln_w = nullptr;  // cross_attn_ln
  ggml_tensor* cross_ln_b = nullptr;
  ggml_tensor* cross_q_w = nullptr;  // cross_attn.query
  ggml_tensor* cross_q_b = nullptr;
  ggml_tensor* cross_k_w = nullptr;  // cross_attn.key (no bias)
  ggml_tensor* cross_v_w = nullptr;
  ggml_tensor* cross_v_b = nullptr;
  ggml_tensor* cross_out_w = nullptr;
  ggml_tensor* cross_out_b = nullptr;
  ggml_tensor* mlp_ln_w = nullptr;
  ggml_tensor* mlp_ln_b = nullptr;
  ggml_tensor* mlp_0_w = nullptr;
  ggml_tensor* mlp_0_b = nullptr;
  ggml_tensor* mlp_1_w = nullptr;
  ggml_tensor* mlp_1_b = nullptr;
};

struct Weights {
  ggml_tensor* enc_pos = nullptr;  // encoder.positional_embedding [n_audio_state, n_audio_ctx]
  ggml_tensor* conv1_w = nullptr;  // encoder.conv1.weight [3, n_mels, n_audio_state]
  ggml_tensor* conv1_b = nullptr;  // [1, n_audio_state]
  ggml_tensor* conv2_w = nullptr;  // encoder.conv2.weight [3, n_audio_state, n_audio_state]
  ggml_tensor* conv2_b = nullptr;
  ggml_tensor* enc_ln_w = nullptr;  // encoder.ln_post
  ggml_tensor* enc_ln_b = nullptr;
  std::vector<EncoderLayer> encoder;

  ggml_tensor* dec_pos = nullptr;    // decoder.positional_embedding [n_text_state, n_text_ctx]
  ggml_tensor* token_emb = nullptr;  // decoder.token_embedding.weight [n_text_state, n_vocab]
  ggml_tensor* dec_ln_w = nullptr;   // decoder.ln
  ggml_tensor* dec_ln_b = nullptr;
  std::vector<DecoderLayer> decoder;
};

struct MelFilters {
  int n_mel = 0;
  int n_fft = 0;            // 201 bins for Whisper
  std::vector<float> data;  // [n_mel][n_fft], row-major
};

struct LoadOptions {
  // Alignment heads to use instead of the preset chosen from the dimensions.
  std::vector<AlignmentHead> alignment_heads;
  // The ggml device to hold the weights on (runtime::resolve_device): empty or
  // "cpu" = CPU, "auto" = the first GPU else the CPU, or a device name (CUDA0).
  std::string backend;
  // The blocks' quantised projections on ggml's AMX kernels where the CPU has them
  // (runtime/amx.h; runtime::amx_wanted decides from --cpu-kernels). Not
  // bit-identical to libwhisper: the same integer products, added in another order.
  bool amx = false;
};

class Model {
 public:
  // Loads a legacy ggml Whisper file. Throws earshot::Error (kInvalidModel / kIo)
  // naming the exact problem: bad magic, truncation at a named tensor, a missing
  // tensor, a wrong shape or type, absurd hyper-parameters.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, const LoadOptions& options = {});

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Hparams& hparams() const { return hparams_; }
  const MelFilters& mel_filters() const { return mel_filters_; }
  // Token bytes exactly as stored in the file (id -> bytes), n_vocab entries
  // padded with "[_extra_token_N]" style placeholders for ids the file lacks.
  const std::vector<std::string>& vocabulary() const { return vocabulary_; }
  const Weights& weights() const { return weights_; }
  const std::vector<AlignmentHead>& alignment_heads() const { return alignment_heads_; }
  ggml_type weight_type() const { return weight_type_; }
  // A backend on the device holding the weights (sessions compute there).
  ggml_backend_t backend() const { return backend_.get(); }
  ggml_backend_dev_t device() const { return ggml_backend_get_device(backend_.get()); }
  // Size name guessed from the dimensions ("tiny.en", "large-v3", ...; "" when unknown).
  const std::string& size_name() const { return size_name_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  Model() = default;
  friend class ModelLoader;

  Hparams hparams_;
  MelFilters mel_filters_;
  std::vector<std::string> vocabulary_;
  Weights weights_;
  std::vector<AlignmentHead> alignment_heads_;
  ggml_type weight_type_ = GGML_TYPE_F16;
  std::string size_name_;
  std::filesystem::path path_;

  ggml_backend_ptr backend_;
  runtime::ModelWeights tensors_;  // every tensor of weights_, in one buffer
};

}  // namespace earshot::whisper

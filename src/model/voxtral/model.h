// Mistral's Voxtral Mini 4B Realtime (voxtral_realtime): a natively streaming
// audio LLM. A causal audio encoder (a conv stem padded on the left, then RoPE
// transformer layers with a sliding window of 750 frames) whose output, four
// frames at a time, goes through a projector to one audio embedding per 80 ms
// slot; the embedding is ADDED to the decoder's input embedding of that slot's
// position. The decoder (Ministral: GQA, RoPE, a sliding window of 8192) emits
// one token per slot, `delay` slots after its audio, its FFN input scaled per
// layer by a function of the delay (ada-norm). docs/voxtral.md has the sources.
//
// Read from transcribe.cpp's published GGUF layout (architecture
// "voxtral_realtime", stt.voxtral_realtime.* keys, enc./proj./dec. tensors),
// which scripts/convert/voxtral_gguf.py also writes from Mistral's checkpoint.
//
//   auto model = voxtral::Model::load("Voxtral-Mini-4B-Realtime-2602-Q4_K_M.gguf");
//   voxtral::Stream stream(model, {});   // stream.h
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>
#include <ggml.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/runtime/weights.h"
#include "model/voxtral/vocab.h"

namespace earshot::voxtral {

inline constexpr char kGgufArchitecture[] = "voxtral_realtime";

struct Hparams {
  // Audio encoder (causal RoPE transformer, full multi-head attention).
  int enc_n_layer = 32;
  int enc_d = 1280;
  int enc_n_head = 32;
  int enc_head_dim = 64;
  int enc_ff = 5120;
  int n_mels = 128;
  int enc_window = 750;  // frames a frame attends to, itself included
  float enc_rope_theta = 1e6f;
  float enc_eps = 1e-5f;
  // Projector: `downsample` encoder frames make one audio embedding.
  int downsample = 4;
  int mel_frames_per_slot = 8;  // audio_length_per_tok
  // Decoder (Ministral).
  int n_layer = 26;
  int d = 3072;
  int ff = 9216;
  int n_head = 32;
  int n_kv_head = 8;
  int head_dim = 128;
  float eps = 1e-5f;
  float rope_theta = 1e6f;
  int window = 8192;          // positions a position attends to, itself included
  int max_position = 131072;  // RoPE positions the model was trained on
  int n_vocab = 131072;
  // Delay conditioning.
  int default_delay = 6;  // slots (480 ms)
  float time_theta = 10000.0f;
  int ada_hidden = 32;
  // Front end: log-mel with a fixed maximum.
  int sample_rate = 16000;
  int n_fft = 400;
  int hop = 160;
  float log_mel_max = 1.5f;
  // Tokens.
  int bos = 1;
  int eos = 2;
  int streaming_pad = 32;
  int streaming_word = -1;  // "[STREAMING_WORD]" when the vocabulary names it
  // Slots of silence before the audio: tekken's streaming_n_left_pad_tokens (32
  // for Voxtral-Mini-4B-Realtime-2602; transcribe.cpp's files do not carry it).
  int n_left_pad = 32;

  int samples_per_slot() const { return hop * mel_frames_per_slot; }  // 1280: 80 ms
  int enc_q_dim() const { return enc_n_head * enc_head_dim; }
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
  double slot_seconds() const { return static_cast<double>(samples_per_slot()) / sample_rate; }
};

// The delays the model was trained with, in slots: 1..15 (80 to 1200 ms) and 30
// (2400 ms), as Mistral's model card lists them.
bool is_published_delay(int slots);
// "80, 160, ..., 1200 or 2400 ms" for messages.
std::string published_delays_text();

struct EncoderLayer {
  ggml_tensor *norm_attn, *q_w, *q_b, *k_w, *v_w, *v_b, *o_w, *o_b;
  ggml_tensor *norm_ffn, *gate_w, *up_w, *down_w, *down_b;
};

struct DecoderLayer {
  ggml_tensor *norm_attn, *q_w, *k_w, *v_w, *o_w;
  ggml_tensor *norm_ffn, *gate_w, *up_w, *down_w;
  ggml_tensor *ada1_w, *ada2_w;
};

struct LoadOptions {
  // The encoder's matrices of another quantised type (Q4_K, Q5_K, Q6_K: the k-quant
  // presets) converted to Q8_0 at load where the int8 op runs (the CPU, with
  // AVX512-VNNI: runtime/q8_gemm.h), so the encoder's products run on it at ~10x
  // ggml's k-quant rate; each value is the file's, rounded to Q8_0 (per 32, d =
  // max |w| / 127). Costs the Q8_0 copy's memory (~0.9 GB at the real dimensions)
  // besides the file's. false: the file's types on ggml's kernels.
  bool int8_encoder = true;
};

class Model {
 public:
  // device null: the CPU. Throws earshot::Error: kIo; kInvalidModel naming the
  // key or tensor (not this architecture, a missing, mis-shaped or mistyped
  // tensor, a value out of range); kUnsupported for a setting earshot does not
  // compute (another activation, front end or tokenizer).
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, ggml_backend_dev_t device = nullptr,
                                           LoadOptions options = {});

  const Hparams& hparams() const { return hparams_; }
  const Vocab& vocab() const { return vocab_; }
  const std::string& name() const { return name_; }
  ggml_backend_dev_t device() const { return device_; }
  const std::vector<float>& mel_filters() const { return filters_; }  // [n_mels][n_fft/2 + 1]
  const std::vector<float>& window() const { return window_; }        // n_fft
  // The bytes the decoder reads per step (its matrices and the token embedding as
  // the head), and the encoder's matrices: for the benchmarks' bandwidth figures.
  uint64_t decoder_step_bytes() const { return decoder_step_bytes_; }
  uint64_t encoder_bytes() const { return encoder_bytes_; }
  // The type of the decoder's projections (q of layer 0): "q4_K"...
  ggml_type matrix_type() const { return matrix_type_; }
  // The encoder's matrices converted to Q8_0 at load (LoadOptions::int8_encoder).
  int int8_encoder_matrices() const { return int8_encoder_matrices_; }

  // Per decoder layer, 1 + ada(t(delay)): [n_layer][d] (computed once per delay, then shared).
  std::shared_ptr<const std::vector<float>> ada_scales(int delay) const;

  // Encoder.
  ggml_tensor *conv0_w = nullptr, *conv0_b = nullptr, *conv1_w = nullptr, *conv1_b = nullptr;
  ggml_tensor* enc_norm = nullptr;
  std::vector<EncoderLayer> enc_layers;
  // Projector.
  ggml_tensor *proj1_w = nullptr, *proj2_w = nullptr;
  // Decoder.
  ggml_tensor* tok_embd = nullptr;  // also the head (tied)
  ggml_tensor* out_norm = nullptr;
  std::vector<DecoderLayer> layers;

  Model() = default;

 private:
  friend struct ModelLoader;
  Hparams hparams_;
  Vocab vocab_;
  std::string name_;
  ggml_backend_dev_t device_ = nullptr;
  runtime::ModelWeights weights_;
  ggml_context_ptr int8_ctx_;  // the Q8_0 copies of the encoder's matrices, when converted
  ggml_backend_buffer_ptr int8_buffer_;
  int int8_encoder_matrices_ = 0;
  std::vector<float> filters_, window_, inv_freq_;
  uint64_t decoder_step_bytes_ = 0, encoder_bytes_ = 0;
  ggml_type matrix_type_ = GGML_TYPE_F32;
  mutable std::mutex ada_mutex_;
  mutable std::vector<std::shared_ptr<const std::vector<float>>> ada_by_delay_;
};

// The tensors a file with these hyper-parameters holds (ggml order), matrices
// typed `matrix_type`, conv kernels `conv_type`, the rest f32: transcribe.cpp's
// layout (scripts/convert-voxtral_realtime.py).
std::vector<runtime::ExpectedTensor> expected_tensors(const Hparams& hp, ggml_type matrix_type, ggml_type conv_type);
// Whether a tensor of that layout is a linear's matrix (quantisable), a conv kernel, or neither (f32).
bool is_matrix_tensor(const std::string& name);
bool is_conv_tensor(const std::string& name);

}  // namespace earshot::voxtral

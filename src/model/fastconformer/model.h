// A FastConformer transducer (NVIDIA Parakeet-TDT and its RNN-T relatives):
// hyper-parameters where every flag comes from the file, the weights on a ggml
// device, the featuriser's filter bank and window, the piece vocabulary and the
// transducer decoder's host weights. Reads whisper.cpp's legacy Parakeet .bin
// (ggml-org's parakeet-tdt-0.6b-v3-*.bin) and earshot's own GGUF layout
// (architecture kGgufArchitecture; keys in docs/fastconformer-gguf.md).
//
//   auto model = fastconformer::Model::load("ggml-parakeet-tdt-0.6b-v3-f16.bin");
//   fastconformer::Encoder encoder(model, backend);   // encoder.h
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/runtime/model_file.h"
#include "model/runtime/weights.h"
#include "model/transducer/decoder.h"

namespace earshot::fastconformer {

inline constexpr char kGgufArchitecture[] = "earshot-fastconformer-transducer";

enum class ConvNorm { kBatchNorm, kLayerNorm };
enum class FeatureNorm { kPerFeature, kNone };
// NeMo's att_context_style: kRegular masks a band of [left, right] frames around
// each query; kChunkedLimited splits time into chunks of right + 1 frames, each
// seeing itself and left / (right + 1) whole chunks before it (cache-aware streaming).
enum class AttentionStyle { kRegular, kChunkedLimited };

struct Hparams {
  int n_vocab = 0;      // SentencePiece pieces (blank is n_vocab)
  int n_audio_ctx = 0;  // mel frames the reference encodes in one pass (legacy n_audio_ctx)
  int n_state = 0;      // d_model
  int n_head = 0;
  int n_layer = 0;
  int ff_expansion = 4;  // d_ff = ff_expansion * d_model
  int n_mels = 0;
  int n_fft = 0;
  int hop_length = 160;
  int sample_rate = 16000;
  int subsampling_factor = 8;
  int n_sub_channels = 0;
  int n_conv_kernel = 0;
  int n_pred_dim = 0;
  int n_pred_layers = 0;
  int n_max_symbols = 10;
  std::vector<int> durations;  // TDT; empty: RNN-T
  float eps = 1e-5f;
  // Flags (legacy .bin: fixed by the format, which only Parakeet-TDT uses; GGUF: keys).
  bool xscaling = false;  // scale the subsampled input by sqrt(d_model)
  bool bias = false;      // biases on attention, FFN and conv-module linears
  ConvNorm conv_norm = ConvNorm::kBatchNorm;
  std::string subsampling = "dw_striding";
  bool causal_subsampling = false;
  bool causal_conv = false;
  int att_left = -1, att_right = -1;  // attention context in frames; -1: unlimited
  AttentionStyle att_style = AttentionStyle::kRegular;
  // The right contexts a multi-lookahead model was trained with (att_right among
  // them, the default); empty: att_right only.
  std::vector<int> att_right_options;
  // Nemotron 3.5's language prompt kernel: the encoder output concatenated with
  // an n_prompts-wide one-hot -> Linear (n_prompt_hidden) -> ReLU -> Linear back
  // to d_model, before the joint. n_prompts 0: none. prompt_dictionary maps the
  // file's language tags ("en-US", "auto") to their one-hot slots.
  int n_prompts = 0;
  int n_prompt_hidden = 0;
  std::vector<std::pair<std::string, int>> prompt_dictionary;
  // Featuriser.
  float preemph = 0.97f;
  float log_guard = 5.960464477539063e-08f;  // 2^-24, added before the log
  FeatureNorm feature_norm = FeatureNorm::kPerFeature;

  int d_head() const { return n_state / n_head; }
  // Encoder frames of n_mel_frames mel frames: three stride-2 convs, kernel 3,
  // padded 1 | 1 (symmetric) or 2 | 1 (causal: floor(n / 2) + 1 per stage).
  int encoder_frames(int n_mel_frames) const;
  // Frequency bins left after the subsampling (n_mels / 8; causal: 17 of 128).
  int subsampled_bins() const;
  // Whether this right context (frames) is one the file supports.
  bool supports_right_context(int right) const;
  // A cache-aware streaming model (causal subsampling and conv, chunked_limited
  // attention with a bounded left context, no utterance normalisation).
  bool streaming() const;
};

// Per conformer layer, views into the model's weights.
struct Layer {
  ggml_tensor *norm_ff1_w, *norm_ff1_b, *ff1_w1, *ff1_w2;
  ggml_tensor *norm_att_w, *norm_att_b, *q_w, *k_w, *v_w, *out_w, *pos_w, *pos_bias_u, *pos_bias_v;
  // bn_*: the conv module's norm (BatchNorm; LayerNorm: bn_w and bn_b only, the rest null).
  ggml_tensor *norm_conv_w, *norm_conv_b, *pw1_w, *dw_w, *bn_w, *bn_b, *bn_mean, *bn_var, *pw2_w;
  ggml_tensor *norm_ff2_w, *norm_ff2_b, *ff2_w1, *ff2_w2;
  ggml_tensor *norm_out_w, *norm_out_b;
  // Linear and conv biases (NeMo's use_bias, hp.bias: the Sortformer's NEST
  // encoder); null where the file has none (the transducers).
  ggml_tensor *ff1_b1 = nullptr, *ff1_b2 = nullptr, *q_b = nullptr, *k_b = nullptr, *v_b = nullptr, *out_b = nullptr;
  ggml_tensor *pw1_b = nullptr, *dw_b = nullptr, *pw2_b = nullptr, *ff2_b1 = nullptr, *ff2_b2 = nullptr;
};

class Model {
 public:
  // Loads either format (told apart by the first bytes). device null: the CPU.
  // Throws earshot::Error: kIo (cannot read), kInvalidModel (truncated, missing
  // or unexpected tensor, wrong shape or type, bad hyper-parameter: each named),
  // kUnsupported (a flag combination this build does not compute, named).
  // amx: the encoder's quantised product weights go to ggml's AMX kernels where the
  // CPU has them (runtime/amx.h; runtime::amx_wanted decides from --cpu-kernels).
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, ggml_backend_dev_t device = nullptr,
                                           bool amx = false);
  // An encoder without a transducer (the Sortformer diarizer's): `weights` hold
  // at least expected_encoder_tensors(hp) under NeMo's names (checked by the
  // caller); other tensors stay findable through weights(). Throws
  // Error(kUnsupported) for a flag this build does not compute.
  static std::shared_ptr<const Model> encoder_only(Hparams hp, runtime::ModelWeights weights, ggml_backend_dev_t device,
                                                   const std::string& label);

  const Hparams& hparams() const { return hparams_; }
  const std::vector<float>& mel_filters() const { return filters_; }  // [n_mels][n_fft/2 + 1]
  const std::vector<float>& window() const { return window_; }
  const std::vector<std::string>& pieces() const { return pieces_; }
  const transducer::DecoderWeights& decoder_weights() const { return decoder_; }
  const runtime::ModelWeights& weights() const { return weights_; }
  ggml_backend_dev_t device() const { return device_; }
  const std::string& format() const { return format_; }  // "ggml-legacy" or "gguf"

  // Subsampling (pre_encode) tensors and the layers.
  ggml_tensor *pre_conv_w[5] = {}, *pre_conv_b[5] = {};  // conv.0, conv.2, conv.3, conv.5, conv.6
  ggml_tensor *pre_out_w = nullptr, *pre_out_b = nullptr;
  std::vector<Layer> layers;

  Model() = default;

 private:
  friend struct ModelBuilder;
  Hparams hparams_;
  std::vector<float> filters_, window_;
  std::vector<std::string> pieces_;
  transducer::DecoderWeights decoder_;
  runtime::ModelWeights weights_;
  ggml_backend_dev_t device_ = nullptr;
  std::string format_;
};

// The tensors a model with these hyper-parameters has, under NeMo's names, in
// the order both writers store them. is_matrix_tensor() ones take `matrix_type`;
// the rest are f32 (as whisper.cpp's converter writes them).
std::vector<runtime::ExpectedTensor> expected_tensors(const Hparams& hp, ggml_type matrix_type);
// The encoder's part of those (pre_encode and the layers; with hp.bias their
// linear and conv biases too).
std::vector<runtime::ExpectedTensor> expected_encoder_tensors(const Hparams& hp, ggml_type matrix_type);
// Whether a tensor of that name may hold a quantised or f16 type: the matrices of
// linears, the prediction net's embedding and LSTM (whisper.cpp's converter writes
// the rest, norms, biases and convolution kernels, as f32).
bool is_matrix_tensor(const std::string& name);

// Where the tensor records of a legacy (whisper.cpp) Parakeet .bin start, after
// its header, filter bank, window, durations and vocabulary; the header and the
// records are checked as Model::load checks them. Throws like Model::load.
uint64_t legacy_tensors_offset(const std::filesystem::path& path);

// Whether Model::load takes a file so probed: whisper.cpp's Parakeet .bin,
// earshot's GGUF, and transcribe.cpp's and parakeet.cpp's Parakeet GGUFs
// (published_gguf.h; what their keys ask that earshot does not compute is refused at load).
bool reads_model_file(const runtime::ModelFileProbe& probe);

// The encoder's and its front end's hyper-parameters from the GGUF keys under
// `arch.` that earshot's layouts of the transducers and of the Sortformer
// diarizer share: sizes, convolution, subsampling, x-scaling, biases, mel
// settings (counts above 2^30 read as 2^30, which validation refuses). The
// attention context and the feature normalisation are each family's own.
// Throws Error(kInvalidModel) for an unknown conv.norm, the GGUF reader's
// errors for a missing or mistyped key.
void read_encoder_keys(const runtime::GgufFile& f, const std::string& arch, const std::string& label, Hparams& hp);

// Throws Error(kUnsupported) naming the first flag this build cannot compute
// (check_supported: as a transducer, which has no biases; check_encoder_supported:
// the offline encoder alone, biases included).
void check_supported(const Hparams& hp, const std::string& label);
void check_encoder_supported(const Hparams& hp, const std::string& label);
// Throws Error(kUnsupported) when the model cannot stream (naming why), and
// kInvalidArgument for a right context the file does not support (listing those it does).
void check_streaming(const Hparams& hp, int right_context, const std::string& label);

// The prompt slot for a language: "auto" takes the dictionary's auto entry; a
// locale ("de-DE") its own; a bare code ("de") the first locale of that language
// in the file's order. Throws Error(kInvalidArgument) listing the file's
// languages when none matches, and for a model without a prompt kernel.
int prompt_slot(const Hparams& hp, const std::string& language);
// The language codes a prompt model takes: each locale and its bare code, in the file's order.
std::vector<std::string> prompt_languages(const Hparams& hp);

}  // namespace earshot::fastconformer

// NVIDIA's streaming Sortformer speaker diarizer (diar_streaming_sortformer_4spk-v2
// and its relatives): NeMo's mel, a FastConformer (NEST) encoder at 80 ms frames
// (earshot's, src/model/fastconformer, biases included), a linear projection to the
// Transformer's width, a post-LN Transformer encoder, and a head giving each frame
// an independent sigmoid probability per speaker, speakers in order of arrival.
// Read from earshot's GGUF layout (architecture kGgufArchitecture; docs/sortformer-gguf.md)
// or from transcribe.cpp's published one (stt.sortformer.* keys).
//
//   auto model = sortformer::Model::load("diar_streaming_sortformer_4spk-v2.gguf");
//   auto probs = sortformer::frame_probabilities(*model, samples16k);   // offline
//   sortformer::Stream stream(*model, {});                               // stream.h
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/fastconformer/model.h"
#include "model/runtime/openblas_ops.h"

namespace earshot::sortformer {

inline constexpr char kGgufArchitecture[] = "earshot-sortformer";

// The speaker cache's settings as the file's training config has them (NeMo's
// SortformerModules); Stream's options may override the sizes.
struct CacheParams {
  int spkcache_len = 188;
  int fifo_len = 0;
  int chunk_len = 188;
  int update_period = 188;
  int chunk_left_context = 1;
  int chunk_right_context = 1;
  int sil_frames_per_spk = 3;
  float pred_score_threshold = 0.25f;
  float scores_boost_latest = 0.05f;
  float sil_threshold = 0.2f;
  float strong_boost_rate = 0.75f;
  float weak_boost_rate = 1.5f;
  float min_pos_scores_rate = 0.5f;
  // The model's async_streaming: NeMo's streaming_update_async (fixed-size buffers;
  // the cache keeps the predictions its frames had when they left the FIFO) instead
  // of streaming_update (which takes the current step's predictions of the cache's
  // frames at its first compression). The only difference for one stream.
  bool async_streaming = false;
};

struct Hparams {
  fastconformer::Hparams encoder;  // n_vocab 0: no transducer
  int n_speakers = 4;
  int tf_d_model = 192;
  int tf_n_layer = 18;
  int tf_n_head = 8;
  int tf_d_ff = 768;
  float tf_eps = 1e-5f;
  CacheParams cache;

  // Seconds per output frame (hop x subsampling / sample rate: 0.08).
  double frame_seconds() const;
};

struct TransformerLayer {
  ggml_tensor *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *out_w, *out_b;
  ggml_tensor *ln1_w, *ln1_b, *ff_in_w, *ff_in_b, *ff_out_w, *ff_out_b, *ln2_w, *ln2_b;
};

class Model {
 public:
  // device null: the CPU. Throws earshot::Error: kIo, kInvalidModel (not this
  // architecture, a missing, unexpected or mis-shaped tensor, a bad key: each
  // named), kUnsupported (a flag this build does not compute).
  static std::shared_ptr<const Model> load(const std::filesystem::path& path, ggml_backend_dev_t device = nullptr);

  const Hparams& hparams() const { return hparams_; }
  // The encoder part as earshot's FastConformer (its weights hold every tensor of the file).
  const fastconformer::Model& encoder() const { return *encoder_; }
  const std::vector<float>& mel_filters() const { return filters_; }  // [n_mels][n_fft/2 + 1]
  const std::vector<float>& window() const { return window_; }
  ggml_backend_dev_t device() const { return encoder_->device(); }

  ggml_tensor *proj_w = nullptr, *proj_b = nullptr;  // encoder_proj: d_enc -> tf_d_model (null when equal)
  std::vector<TransformerLayer> layers;
  ggml_tensor *head_hidden_w = nullptr, *head_hidden_b = nullptr;  // sortformer.hidden: first_hidden_to_hidden
  ggml_tensor *head_out_w = nullptr, *head_out_b = nullptr;        // sortformer.speakers: single_hidden_to_spks

  Model() = default;

 private:
  friend struct ModelLoader;
  Hparams hparams_;
  std::shared_ptr<const fastconformer::Model> encoder_;
  std::vector<float> filters_, window_;
};

// The tensors a file with these hyper-parameters holds besides the encoder's
// (fastconformer::expected_encoder_tensors, NeMo's names) and the featuriser's:
// transformer.N.{attn_q,attn_k,attn_v,attn_out,norm_1,ffn_in,ffn_out,norm_2} and
// sortformer.{encoder_proj,hidden,speakers} (GGUF names hold at most 63 bytes).
std::vector<runtime::ExpectedTensor> expected_diarizer_tensors(const Hparams& hp, ggml_type matrix_type);
// Whether the tensor is a linear's matrix (may be f16 or quantised; the rest is f32).
bool is_matrix_tensor(const std::string& name);

// The name transcribe.cpp's Sortformer GGUF (scripts/convert-sortformer.py:
// enc.*, tf.blocks.*, diar.*) gives one of earshot's tensors.
std::string transcribe_cpp_name(const std::string& name);
// NeMo's featuriser buffers when a file has none: librosa's Slaney mel filters
// ([n_mels][n_fft/2 + 1]) and torch.hann_window(n, periodic=False).
std::vector<float> slaney_filters(int n_mels, int n_fft, int sample_rate);
std::vector<float> hann_window(int n);

struct RunOptions {
  int threads = 1;
  // Borrowed, on the model's device; null: a CPU backend of `threads` threads.
  ggml_backend_t backend = nullptr;
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kGgml;
};

struct FrameProbabilities {
  int n_frames = 0;
  int n_speakers = 0;
  std::vector<float> data;  // [n_frames][n_speakers]
};

// The whole recording in one pass (NeMo's forward without streaming: no speaker
// cache, full attention; the samples are not peak-normalised). T = the encoder's
// frames of NeMo's n_samples / hop mel frames. Throws Error(kInvalidArgument)
// for fewer samples than one hop.
FrameProbabilities frame_probabilities(const Model& model, std::span<const float> samples16k,
                                       const RunOptions& options = {});
// The same from NeMo's log-mel ([n_frames][n_mels] frame-major).
FrameProbabilities frame_probabilities_from_mel(const Model& model, std::span<const float> mel, int n_mel_frames,
                                                const RunOptions& options = {});

}  // namespace earshot::sortformer

// Qwen3-ASR through libllama (the Qwen3 decoder, arch qwen3vl) and libmtmd (the
// audio encoder, projector qwen3a), both from the pinned llama.cpp v0.5.0 on
// earshot's ggml. What AlignAtt needs comes from their public API: the audio
// embeddings (mtmd_encode_chunk) kept and reused across passes, decoding with
// the embeddings in the prompt, KV suffix removal (llama_memory_seq_rm), and the
// decoder's attention rows through the graph evaluation callback (tensor
// `kq_soft_max-<layer>`, which exists only with flash attention off).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/runtime/gguf_file.h"
#include "model/runtime/openblas_ops.h"

struct llama_model;
struct llama_context;
struct mtmd_context;
struct ggml_tensor;

namespace earshot::qwen3asr {

// Whisper language code -> Qwen3-ASR's language name (seed 002's table); "" when unknown.
std::string language_name(const std::string& code);
// The reverse; "" when unknown.
std::string language_code(const std::string& name);

// How many mel frames n samples make, which sets the audio-token count: libmtmd
// (the oracle, what llama.cpp runs these GGUFs with) makes n / 160 + 1; Hugging
// Face's WhisperFeatureExtractor and openai/whisper drop the STFT's last frame
// (n / 160). The frames themselves are libmtmd's either way; kHf drops the audio
// tokens the extra frame alone adds (jfk.wav: 144 -> 143, whole seconds: 13 k + 1 -> 13 k).
enum class MelFrames { kMtmd, kHf };

struct ModelOptions {
  int n_threads = 2;
  bool reference_audio_length = true;       // drop mtmd's padding tokens (model-families.md); false: mtmd's count
  MelFrames mel_frames = MelFrames::kMtmd;  // kHf needs reference_audio_length
  bool f32_kv_cache = false;                // F32 K/V instead of F16 (exact comparisons with a reference)
  // The large products (--cpu-kernels). kAuto and kOpenBlas run them on OpenBLAS
  // inside libmtmd's and libllama's graphs (earshot's patches to both): the audio
  // encoder's weight products, conv stem (f32 im2col products) and attention; a
  // prompt's attention over the KV cache; and where the text model's weights are
  // float (F16, BF16, F32), a prompt's weight products (converted to f32 in chunks
  // as they are used) and a step's (runtime::gemv_mul_mat, the weights streamed
  // once). A quantised text model keeps libllama's int8 kernels (AMX where the CPU
  // has it); a step's attention stays ggml's (AlignAtt reads its kq_soft_max
  // node). kGgml leaves both graphs as upstream builds them (f16 im2col, ggml's
  // kernels).
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kAuto;
  // Called for every node of the audio encoder's graph (libmtmd's cb_eval, a
  // ggml_backend_sched_eval_callback): earshot-bench-qwen3asr --profile times its ops with it.
  bool (*encoder_eval_callback)(ggml_tensor* t, bool ask, void* user_data) = nullptr;
  void* encoder_eval_data = nullptr;
};

// The loaded pair, shared by every stream.
class Model {
 public:
  // Throws earshot::Error: kIo for a missing file; kInvalidModel for a text GGUF
  // that is not arch qwen3vl, an mmproj that is not an audio projector qwen3a, a
  // missing mmproj (naming the flag), or a file libllama/libmtmd refuses.
  static std::shared_ptr<const Model> load(const std::filesystem::path& text, const std::filesystem::path& mmproj,
                                           ModelOptions options = {});
  ~Model();

  llama_model* llama() const { return model_; }
  mtmd_context* mtmd() const { return mtmd_; }
  const ModelOptions& options() const { return options_; }
  // Whether the large products run on OpenBLAS (options().cpu_kernels resolved at load).
  bool on_openblas() const { return on_openblas_; }
  int n_layer() const;
  int n_head() const;
  int n_embd() const;
  int n_vocab() const;

  std::vector<int32_t> tokenize(const std::string& text, bool parse_special) const;
  std::string piece(int32_t token) const;  // raw bytes (may cut a UTF-8 character)
  std::string detokenize(std::span<const int32_t> tokens) const;
  bool is_end(int32_t token) const;  // <|im_end|> or <|endoftext|>
  // The tokens' input embeddings (token_embd's rows as f32, zero-padded to
  // n_embd()), read from the file: what libllama's graph takes for a token.
  std::vector<float> token_embeddings(std::span<const int32_t> tokens) const;

 private:
  Model() = default;
  llama_model* model_ = nullptr;
  mtmd_context* mtmd_ = nullptr;
  ModelOptions options_;
  bool on_openblas_ = false;
  std::filesystem::path text_path_;
  runtime::GgufTensor token_embd_;
};

// The alignment heads (layer, query head).
using Head = std::pair<int, int>;

// Throws earshot::Error(kInvalidArgument) naming the first head outside n_layer x n_head.
void check_alignment_heads(const std::vector<Head>& heads, int n_layer, int n_head);
// The same against a text GGUF's header (qwen3vl.block_count, .attention.head_count),
// before the model is loaded; a file without those keys is left to Model::load.
void check_alignment_heads(const std::vector<Head>& heads, const std::filesystem::path& text);

// What a pass decodes against: audio embeddings and the text around them.
struct PromptSpec {
  std::string context;                 // system text (earlier transcript or user context)
  std::string language;                // Qwen3 language name to force, "" to let the model say it
  std::vector<int32_t> prefix_tokens;  // after the forced prefix: committed tokens carried as context
};

// One stream's decoder state (a llama_context of its own).
class Session {
 public:
  Session(std::shared_ptr<const Model> model, std::vector<Head> alignment_heads, int n_ctx = 1024);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Encodes 16 kHz mono audio; the embeddings are kept for every prefill until
  // the next encode. Returns the number of audio tokens.
  int encode(std::span<const float> pcm);
  int n_audio_tokens() const { return n_audio_; }
  const std::vector<float>& audio_embeddings() const { return embd_; }

  // Clears the KV cache and decodes the prompt with the kept audio embeddings.
  // Returns the greedy next token.
  int32_t prefill(const PromptSpec& prompt);
  // Decodes `token` at the next position; returns the greedy next token. The
  // attention of the alignment heads of this step is in step_frames().
  int32_t step(int32_t token);
  // Per alignment head, the most attended audio token (0-based in the audio span) of the last step.
  const std::vector<int>& step_frames() const { return frames_; }
  // Per alignment head, its attention row of the last step over every KV cell (tests).
  const std::vector<std::vector<float>>& step_rows() const { return rows_; }
  // Drops the KV of positions >= pos (re-decode from there).
  void truncate(int pos);
  int n_past() const { return n_past_; }
  int audio_begin() const { return audio_begin_; }
  const std::vector<int32_t>& prompt_tokens() const { return prompt_tokens_; }  // text tokens, audio as kAudioPad
  const std::vector<float>& logits() const { return logits_; }

  // The callback's view of a node (public for the C callback only).
  bool on_node(ggml_tensor* t, bool ask);

 private:
  int32_t decode_tokens(std::span<const int32_t> tokens);
  int32_t argmax_logits();

  std::shared_ptr<const Model> model_;
  std::vector<Head> heads_;
  std::vector<std::vector<int>> heads_by_layer_;  // query heads per layer
  llama_context* ctx_ = nullptr;
  std::vector<float> embd_;
  int n_audio_ = 0;
  int n_past_ = 0;
  int audio_begin_ = 0;
  bool capture_ = false;
  std::vector<int> frames_;
  std::vector<std::vector<float>> rows_;
  std::vector<int32_t> prompt_tokens_;
  std::vector<float> logits_;
};

namespace detail {
// libllama's and libmtmd's one-time set-up for this family: their logs reduced
// to errors, then llama_backend_init (model loading and the writer's quantizer).
void init_backend();
}  // namespace detail

}  // namespace earshot::qwen3asr

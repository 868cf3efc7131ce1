// Qwen3-ASR through libllama (the Qwen3 decoder, arch qwen3vl) and libmtmd (the
// audio encoder, projector qwen3a), both from the pinned llama.cpp v0.5.0 on
// earshot's ggml. What AlignAtt needs comes from their public API: the audio
// embeddings (mtmd_encode_chunk) kept and reused across passes, decoding with
// the embeddings in the prompt, KV suffix removal (llama_memory_seq_rm), and the
// decoder's attention rows through the graph evaluation callback (tensor
// `kq_soft_max-<layer>`, which exists only with flash attention off).
#pragma once

#include <ggml-cpp.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/qwen3asr/audio_windows.h"
#include "model/runtime/gguf_file.h"
#include "model/runtime/openblas_ops.h"

struct llama_model;
struct llama_context;
struct llama_batch;
struct mtmd_context;
struct ggml_tensor;

namespace earshot::qwen3asr {

// Whisper language code -> Qwen3-ASR's language name (WhisperLiveKit's qwen3_simul's table); "" when unknown.
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
  // Work kept across a stream's passes (audio_windows.h): a window whose mel is
  // unchanged keeps its audio tokens. false: every window is encoded on every
  // encode (what a full re-encode does; the same tokens, for comparisons).
  bool reuse_encoder_windows = true;
  // A prefill keeps the KV rows of the prompt's longest prefix that is unchanged
  // since the KV cache was filled (the same text tokens, the same audio tokens of
  // the same encoded windows) and decodes from the first changed position on.
  // false: every prefill decodes the whole prompt.
  bool reuse_prompt_kv = true;
  // Every model computation of the model's streams (an encode, a decode) holds
  // compute_mutex(), one at a time: set where several workers run the streams'
  // passes (--batch-decode), so that two computations never share the cores.
  bool exclusive_compute = false;
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
  // Where a quantised weight's products of many rows (the audio encoder's, a
  // prompt's) run. kInt8: a Q8_0 weight's on earshot's int8 op (runtime/q8_gemm.h:
  // AVX512-VNNI, 3-5x ggml's int8 kernels and sgemm at these shapes; an error
  // where the CPU lacks it), and beside a Q8_0 encoder its conv stem's float
  // kernels as Q8_0 copies (stem_q8()); other types as kAuto places them. kOpenBlas: on
  // OpenBLAS, the weight dequantised in chunks as it is used (a step's few rows
  // stay with ggml's int8 kernels, which read the weight once in its own type);
  // kGgml: ggml's int8 kernels; kAuto: kInt8 for Q8_0 where the CPU has
  // AVX512-VNNI, else OpenBLAS where it runs its AVX-512 kernels, else ggml's (on a
  // Zen 5, Q8_0, 2 threads, a 0.6B prompt's products: 1,000 GFLOP/s on the int8
  // op, 190 on ggml's, 136 on OpenBLAS dequantised). A weight ggml keeps in another
  // layout stays with ggml's kernels either way: libllama puts a quantised text
  // model in ggml's AMX buffer where the CPU has AMX (its int8 tiles outrun
  // sgemm), and Q4_0 in its repacked one.
  enum class QuantizedProducts { kAuto, kOpenBlas, kGgml, kInt8 };
  QuantizedProducts quantized_products = QuantizedProducts::kAuto;
  // Called for every node of the audio encoder's graph (libmtmd's cb_eval, a
  // ggml_backend_sched_eval_callback), after the model's own look at each window's
  // mel: earshot-bench-qwen3asr --profile times its ops with it.
  bool (*encoder_eval_callback)(ggml_tensor* t, bool ask, void* user_data) = nullptr;
  void* encoder_eval_data = nullptr;
  // The same for the text decoder's graphs of a lone Session (prefills and
  // steps; not a SharedContext's), after the alignment heads' capture.
  bool (*decoder_eval_callback)(ggml_tensor* t, bool ask, void* user_data) = nullptr;
  void* decoder_eval_data = nullptr;
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
  // Whether quantised weights' products of many rows do too (options().quantized_products resolved).
  bool quantized_on_openblas() const { return quantized_on_openblas_; }
  // Whether Q8_0 weights' products of many rows run on the int8 op (options().quantized_products resolved).
  bool int8_products() const { return int8_products_; }
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

  // Encodes 16 kHz mono `pcm` window by window (audio_windows.h) into `windows`,
  // a stream's windows as its last encode left them: a window whose mel is
  // unchanged keeps its tokens (unless options().reuse_encoder_windows is false),
  // the others are encoded and take a fresh id from `next_id`. Streams sharing the
  // model encode one at a time (libmtmd's context is one). Throws
  // earshot::Error(kInternal) when libmtmd fails.
  EncodeStats encode_windows(std::span<const float> pcm, std::vector<EncodedWindow>& windows, uint64_t& next_id) const;
  // Held by every encode (libmtmd's context is one), by a shared context's batches
  // (shared_context.h) and, with options().exclusive_compute, by every decode.
  std::mutex& compute_mutex() const { return probe_->mutex; }
  // The Q8_0 copy of an audio encoder conv stem kernel (`t` or the tensor it views,
  // by name), or null. Made at load where the encoder's layer matrices are Q8_0 on
  // the int8 op: a quantised mmproj keeps its conv kernels in F16 (llama.cpp's
  // quantiser), whose products would otherwise run at sgemm's rate, half the
  // encoder's time on a window.
  ggml_tensor* stem_q8(const ggml_tensor* t) const;
  int stem_q8_kernels() const { return static_cast<int>(stem_q8_.size()); }

 private:
  // libmtmd's evaluation callback: reads a window's mel (the graph's first node)
  // for encode_windows and stops the graph there when it is unchanged; then the
  // caller's callback (options().encoder_eval_callback).
  struct EncoderProbe {
    std::mutex mutex;                            // one encode at a time on the shared libmtmd context
    bool active = false;                         // within encode_windows
    const std::vector<float>* cached = nullptr;  // the window's last mel; null: encode it whatever it is
    std::vector<float> mel;                      // the mel read this time
    bool read = false;                           // the graph's input node was seen
    bool unchanged = false;                      // and equals `cached`: the graph stopped there
    bool outer_asked = false;                    // the caller's callback wanted the node last asked about
    const EncodedWindow* window = nullptr;       // the window being encoded (its chunks' stems)
    int kept_chunks = 0;                         // chunks the graph takes from window->stem
    std::vector<float> stem_new;                 // every chunk's stem output as the graph took it
    int64_t stem_width = 0;                      // values per stem token
  };
  static bool encoder_node(ggml_tensor* t, bool ask, void* model);
  // libmtmd's audio_stem hook: how many of the window's first chunks keep their stem
  // output (their mel unchanged since the window's last encode), and where it is.
  static int audio_stem(const float* mel, int64_t n_frames, int64_t n_mel, const float** kept, void* model);

  void load_stem_q8(const std::filesystem::path& mmproj, const std::vector<runtime::GgufTensor>& kernels);

  Model() = default;
  llama_model* model_ = nullptr;
  mtmd_context* mtmd_ = nullptr;
  ModelOptions options_;
  bool on_openblas_ = false;
  bool quantized_on_openblas_ = false;
  bool int8_products_ = false;
  bool stem_hook_ = false;  // libmtmd's graph runs the stem per chunk (audio_stem is set)
  std::filesystem::path text_path_;
  runtime::GgufTensor token_embd_;
  std::unique_ptr<EncoderProbe> probe_ = std::make_unique<EncoderProbe>();
  ggml_context_ptr stem_ctx_;  // stem_q8()'s tensors
  ggml_backend_buffer_ptr stem_buffer_;
  std::vector<ggml_tensor*> stem_q8_;
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

class SharedContext;

// One stream's decoder state: a llama_context of its own, or a slot of a shared
// one (shared_context.h: its decodes batched with the other slots'; a lone
// context when every slot is taken or n_ctx exceeds a slot).
class Session {
 public:
  Session(std::shared_ptr<const Model> model, std::vector<Head> alignment_heads, int n_ctx = 1024,
          std::shared_ptr<SharedContext> shared = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Encodes 16 kHz mono audio; the embeddings are kept for every prefill until
  // the next encode. Windows whose mel did not change since the last encode keep
  // their tokens (Model::encode_windows). Returns the number of audio tokens.
  int encode(std::span<const float> pcm);
  int n_audio_tokens() const { return n_audio_; }
  const std::vector<float>& audio_embeddings() const { return embd_; }
  const EncodeStats& last_encode() const { return last_encode_; }

  // Decodes the prompt with the kept audio embeddings into the KV cache, from the
  // first position whose token differs from what the cache holds there (every
  // position when options().reuse_prompt_kv is false); the cache's rows before it
  // are kept. Returns the greedy next token.
  int32_t prefill(const PromptSpec& prompt);
  // What the last prefill did.
  struct PrefillStats {
    int tokens = 0;   // the prompt's
    int reused = 0;   // of them, KV rows kept from before
    int decoded = 0;  // of them, decoded now (tokens - reused)
  };
  const PrefillStats& last_prefill() const { return last_prefill_; }
  // Decodes `token` at the next position; returns the greedy next token. The
  // attention of the alignment heads of this step is in step_frames().
  int32_t step(int32_t token);
  // Per alignment head, the most attended audio token (0-based in the audio span) of the last step.
  const std::vector<int>& step_frames() const { return frames_; }
  // Per alignment head, its attention row of the last step over every KV cell (tests).
  const std::vector<std::vector<float>>& step_rows() const { return rows_; }
  // On a shared context's slot, a pass runs from encode() to end_pass(): while
  // it runs, the other streams' batches wait for its prompt and steps (so that
  // they go together); end_pass() says it decodes no more.
  void end_pass();
  // Whether this stream decodes on a shared context's slot.
  bool shares_context() const { return slot_ >= 0; }
  // Drops the KV of positions >= pos (re-decode from there).
  void truncate(int pos);
  int n_past() const { return n_past_; }
  int audio_begin() const { return audio_begin_; }
  const Model& model() const { return *model_; }
  const std::vector<int32_t>& prompt_tokens() const { return prompt_tokens_; }  // text tokens, audio as kAudioPad
  const std::vector<float>& logits() const { return logits_; }

  // The callback's view of a node (public for the C callbacks only): a lone
  // context's, and stream `stream` of a shared context's round.
  bool on_node(ggml_tensor* t, bool ask);
  bool on_stream_node(ggml_tensor* t, bool ask, int stream);

 private:
  int32_t decode_tokens(std::span<const int32_t> tokens);
  int decode_lone(const llama_batch& batch);  // llama_decode, under compute_mutex() where exclusive
  // Rows as embeddings with M-RoPE positions (4 x rows) on the shared slot; the greedy next token.
  int32_t decode_shared(const float* embd, const int32_t* pos, int rows, int first_pos);
  int32_t argmax_logits();  // the last decode's logits from libllama into logits_, and greedy()
  int32_t greedy() const;   // the argmax of logits_
  // The decode that follows runs on pass_threads() (common/pass_threads.h) when set.
  void follow_pass_threads();

  std::shared_ptr<const Model> model_;
  std::vector<Head> heads_;
  std::vector<std::vector<int>> heads_by_layer_;  // query heads per layer
  llama_context* ctx_ = nullptr;
  std::shared_ptr<SharedContext> shared_;
  int slot_ = -1;  // of shared_, or -1: ctx_ is the stream's own
  std::vector<EncodedWindow> windows_;
  uint64_t next_window_id_ = 1;
  EncodeStats last_encode_;
  std::vector<float> embd_;
  std::vector<uint64_t> audio_ids_;  // per audio token: its window's id and its index there
  int n_audio_ = 0;
  int n_past_ = 0;
  int audio_begin_ = 0;
  bool capture_ = false;
  bool outer_asked_ = false;  // options().decoder_eval_callback wanted the node last asked about
  std::vector<int> frames_;
  std::vector<std::vector<float>> rows_;
  std::vector<int32_t> prompt_tokens_;
  // What each KV position holds: a text token's id, or kAudioKey | an audio token's id.
  static constexpr uint64_t kAudioKey = uint64_t{1} << 63;
  std::vector<uint64_t> kv_keys_;
  PrefillStats last_prefill_;
  std::vector<float> logits_;
};

namespace detail {
// libllama's and libmtmd's one-time set-up for this family: their logs reduced
// to errors, then llama_backend_init (model loading and the writer's quantizer).
void init_backend();
}  // namespace detail

}  // namespace earshot::qwen3asr

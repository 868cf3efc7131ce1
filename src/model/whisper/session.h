// One stream's Whisper inference state on a shared, immutable Model: the
// encoder output as per-layer cross-attention K/V (computed once per encode()
// and reused by every decode() step), a self-attention KV cache for n parallel
// sequences (beams; runtime::KvCache) that can be rolled back and reordered and
// shares a prompt decoded once, and its own compute
// buffers, allocated once and reused. Used by one thread at a time; many
// sessions may share one Model across threads.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "features/mel.h"
#include "model/asr_decoder.h"
#include "model/runtime/openblas_ops.h"
#include "model/whisper/asr_text.h"
#include "model/whisper/model.h"
#include "model/whisper/tokenizer.h"

namespace earshot::whisper {

class DecodeBatcher;
class BatchExecutor;
namespace detail {
struct PreparedStep;
struct StateTensors;
}  // namespace detail

enum class EncoderInput {
  // Always encode the standard 30 s window (3000 mel frames, 1500 encoder frames),
  // zero-padded after the audio: exactly what whisper.cpp and OpenAI do.
  kFullWindow,
  // Encode only the audio present and audio_pad_frames of padding, rounded up to
  // audio_bucket_frames mel frames, with the positional embedding sliced to that
  // length. Faster for short audio;
  // the output differs from kFullWindow because attention no longer spans the
  // padding (the model was trained on 30 s windows, so quality may drop a little).
  kAudioOnly,
};

struct SessionOptions {
  int n_threads = 4;
  EncoderInput encoder_input = EncoderInput::kFullWindow;
  // kAudioOnly bucket in mel frames (100 = 1 s); keeps the number of distinct
  // graph shapes small.
  int audio_bucket_frames = 100;
  // kAudioOnly: mel frames of padding encoded after the audio at least (before the
  // bucket's rounding; 64 = 32 encoder frames, 0.64 s). Stock models cut to the
  // audio's length tend not to stop or to repeat; a margin of padding helps
  // (whisper.cpp users measured lower WER with 32 encoder frames or more added:
  // whisper.cpp issues 1855 and 1951).
  int audio_pad_frames = 64;
  // Fused (flash) attention in the encoder, as whisper.cpp does by default: about 40%
  // less encoder time on the CPU; the logits move by rounding only (8e-3 max abs on
  // the session test's random model). Off = whisper.cpp's op order with an explicit
  // softmax, bit-identical to libwhisper with flash attention off (the parity tool's
  // setting). A device without the fused op uses the explicit one.
  bool flash_attention = true;
  // The encoder's products and attention: ggml's kernels (as libwhisper; the default
  // here), OpenBLAS's sgemm in f32 (runtime/openblas_ops.h: about twice the rate on
  // the CPU, flash_attention then unused), or kAuto: OpenBLAS where it loads and the
  // model is on the CPU. The decoder's weight products: ggml's with kGgml (bit for
  // bit libwhisper's); else on the CPU the few-row op (runtime/rows_ops.h: a step's
  // rows, read at the memory's rate with f32 activations) and OpenBLAS for a prompt
  // of many rows (runtime::step_products).
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kGgml;
  // Tokens appended alike to every sequence of identical caches (the prompt of a
  // beam search) are computed for one sequence and its cache and outputs copied to
  // the others: 2.7-5.7x faster first step of 4 beams (earshot_bench_model). The
  // results equal computing every sequence bit for bit where the backend's matrix
  // products give a row the same value whatever the batch width (ggml's x86 CPU
  // kernels, tested on f32, f16, q8_0; with llamafile a one-token prompt is the
  // exception); elsewhere (ARM's, CUDA's) they may differ by rounding. false
  // computes every sequence (for comparisons and benchmarks).
  bool share_prompt = true;
  // Vocabulary to share between sessions; built from the model's when null.
  std::shared_ptr<const WhisperText> text;
  // Decoder steps of the sessions that share this batcher (and the model) run
  // together as one graph when they are pending at once (batch_decoder.h); the
  // results equal a lone decode, bit for bit or to rounding as batch_decoder.h
  // says. Null: every step is its own graph.
  std::shared_ptr<DecodeBatcher> batcher;
};

class Session : public AsrDecoder {
 public:
  explicit Session(std::shared_ptr<const Model> model, SessionOptions options = {});
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // AsrDecoder
  const AsrText& text() const override { return *text_; }
  std::shared_ptr<const WhisperText> text_ptr() const { return text_; }
  const Tokenizer& tokenizer() const { return text_->tokenizer(); }
  int n_text_ctx() const override;
  int n_alignment_heads() const override;
  double frames_per_second() const override { return 50; }
  int max_samples() const override;
  int encode(std::span<const float> pcm) override;
  void reset(int n_sequences) override;
  int n_past() const override { return n_past_; }
  void rollback(int n_past) override;
  void reorder(std::span<const int> source) override;
  DecodeResult decode(const DecodeRequest& request) override;
  std::vector<float> detect_language() override;

  // Encodes a log-mel spectrogram ([n_mels][n_frames]; frames beyond the encoder
  // window are ignored, missing ones are zero as in whisper.cpp). content_frames
  // is the number of mel frames holding real audio. Returns encoder frames of content.
  int encode_mel(const features::Mel& mel, int content_frames);

  // The log-mel spectrogram the last encode() computed (for diagnostics and parity).
  const features::Mel& last_mel() const;

  const Model& model() const { return *model_; }
  const SessionOptions& options() const { return options_; }
  // Whether the encoder runs fused attention: options().flash_attention where the device has it.
  bool fused_attention() const;
  // Whether the encoder runs on OpenBLAS (options().cpu_kernels resolved).
  bool openblas_encoder() const;
  void set_n_threads(int n_threads);
  // Encoder frames of the last encode (1500 for kFullWindow); 0 before encode.
  int n_audio_frames() const { return n_audio_ctx_; }
  int n_sequences() const { return n_sequences_; }

 private:
  // The batched step (batch_decoder.cpp) validates, runs and completes a session's
  // step through these, on the thread blocked in that session's decode().
  friend class BatchExecutor;
  // Checks a request and plans its step (throws kInvalidArgument as decode() does).
  detail::PreparedStep prepare_decode(const DecodeRequest& request);
  // The step on this session's own buffers.
  DecodeResult run_step(const detail::PreparedStep& step);
  // Advances the cache past a computed step; expands a shared prompt's outputs.
  DecodeResult finish_decode(const detail::PreparedStep& step, DecodeResult result);
  const detail::StateTensors& state() const;

  struct Impl;
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::shared_ptr<const WhisperText> text_;
  std::unique_ptr<Impl> impl_;
  int n_audio_ctx_ = 0;
  int n_sequences_ = 1;
  int n_past_ = 0;
};

// Probability of <|nospeech|> from the logits at the <|startoftranscript|>
// position (softmax over the whole vocabulary, as Whisper does).
float no_speech_probability(std::span<const float> logits, const Tokenizer& tokenizer);

// Softmax over the language-token logits only (index = language id).
std::vector<float> language_probabilities(std::span<const float> logits, const Tokenizer& tokenizer);

}  // namespace earshot::whisper

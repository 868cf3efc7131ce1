// One Voxtral stream: audio in as it arrives, one token out per 80 ms slot.
//
// A context is the model's view of a stream (mistral-common's streaming
// request): 32 slots of silence, then the audio; its prompt is [BOS] +
// [STREAMING_PAD] x (32 + delay), one position per slot with that slot's audio
// embedding added, and from there each slot's position takes the token the one
// before produced. A token produced at position p is about the audio of slot
// p - delay. A segment (audio from one push after finish() to the next
// finish()) ends with the reference's right padding: silence to the next slot,
// then delay + 1 + 10 slots, so its last words come out; the context carries on
// into the next segment, unless the model said EOS (its request is over: the
// next audio starts a new context), a reset was asked (a long pause), or the
// positions reach the model's limit.
//
// Memory is constant: the encoder keeps a ring of its window (750 frames), the
// decoder a ring of its window (8192 positions) grown as positions come, the
// front end a few hundred samples. Every frame, slot and position is computed
// once. The decoder's graphs are the same however the audio is split; an
// encoder graph takes the slots ready (up to max_encoder_slots), and its floats
// depend on how many (the products' blocking): with max_encoder_slots 1 a
// streamed run equals the offline one bit for bit, otherwise within float
// rounding (tests/model/reference/voxtral_reference.py checks both).
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "model/model_pass.h"
#include "model/runtime/graph_runner.h"
#include "model/transducer_stream.h"
#include "model/voxtral/graph.h"
#include "model/voxtral/kv_ring.h"
#include "model/voxtral/mel.h"
#include "model/voxtral/model.h"
#include "model/voxtral/step_batch.h"

namespace earshot::voxtral {

struct ContextStart;  // stream.cpp: a context's state after the silence in front

// The context starts of one model's streams (StreamOptions::context_starts): a
// start is computed by the first stream that needs it and restored by every
// stream whose values it equals (same delay, KV type, encoder grouping, kernels
// and device). It keeps at most kKept starts no stream holds (the least recently
// used go first; 36 MB each at the real dimensions), so clients cycling through
// delays cannot grow it past that and the streams alive. Thread-safe.
class ContextStarts {
 public:
  static constexpr size_t kKept = 4;
  struct Key {
    int delay = 0;
    ggml_type kv_type = GGML_TYPE_F16;
    int max_encoder_slots = 0;
    bool cpu = true, rows = true, openblas_attention = false;
    const void* device = nullptr;
    auto operator<=>(const Key&) const = default;
  };
  std::shared_ptr<const ContextStart> find(const Key& key) const;
  // The start kept for `key`: `start`, or the one another stream kept first.
  std::shared_ptr<const ContextStart> keep(const Key& key, std::shared_ptr<const ContextStart> start);
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const ContextStart> start;
    uint64_t used = 0;  // tick_ when last found or kept
  };
  mutable std::mutex mutex_;
  mutable std::map<Key, Entry> starts_;
  mutable uint64_t tick_ = 0;
};

struct StreamOptions {
  int threads = 1;
  int delay = -1;  // slots (1..30); -1: the file's default
  ggml_type kv_type = GGML_TYPE_F16;
  int max_encoder_slots = 16;  // slots one encoder graph takes at most
  // Slots an encoder graph waits for while the segment goes on (its end encodes
  // what is left): a graph of fewer rows than the int8 op gains from
  // (runtime::kQ8GemmMinRows, 16 frames: 4 slots) reads the whole encoder for
  // them. At most max_encoder_slots; 1: each slot as it comes (its tokens up to
  // 240 ms sooner, its encoder ~4x the time at the real dimensions).
  int min_encoder_slots = 4;
  ggml_backend_t backend = nullptr;  // borrowed, on the model's device; null: the stream's own
  PassReport on_pass;                // each encoder and decoder graph, timed
  // Shared by streams of one model: their decoder steps batched (step_batch.h);
  // null: each step its own graph.
  std::shared_ptr<StepBatcher> batcher;
  // Shared by streams of one model: each context start computed once for all of
  // them; null: once per stream.
  std::shared_ptr<ContextStarts> context_starts;
  // The decoder's products on the few-row op (GraphKernels::rows); false: ggml's
  // kernels for the file's types (--cpu-kernels ggml). A batcher has its own.
  bool rows_decoder = true;
};

// What a stream decoded at one position: for the references and tools.
struct PositionOutput {
  int64_t position = 0;  // in the context
  int token = 0;
  std::span<const float> logits;  // n_vocab
};

class Stream : public StreamingTransducer {
 public:
  // Throws Error(kInvalidArgument) for a delay outside 1..30 slots.
  Stream(std::shared_ptr<const Model> model, StreamOptions options);
  ~Stream() override;

  // StreamingTransducer. Emissions: every token that is not a control token,
  // and [STREAMING_WORD] (a word boundary, no text); frame = its slot from the
  // segment's first sample, duration 1.
  const TokenPieces& pieces() const override { return model_->vocab(); }
  double frame_seconds() const override { return model_->hparams().slot_seconds(); }
  void reset_state() override { reset_ = true; }
  void warmup() override;
  // Greedy, with or without keyterm boosting: each slot's token is the one whose
  // log-probability plus the boost's score is highest (a piece continuing a phrase
  // gains its bonus, one breaking it off takes back what the match had gained;
  // control tokens, the pads between a phrase's pieces among them, leave the
  // match as it is). A beam (width > 1) throws kUnsupported.
  void set_decoding(TransducerDecoding decoding) override;
  std::vector<TokenEmission> push(std::span<const float> samples) override;
  std::vector<TokenEmission> finish() override;
  int frames_done() const override;

  int delay() const { return delay_; }
  const Model& model() const { return *model_; }
  // Called for every position decoded (the prompt's last one onwards).
  void set_observer(std::function<void(const PositionOutput&)> observer) { observer_ = std::move(observer); }
  // Every audio embedding computed in the current context, kept when asked (references).
  void keep_audio(bool keep) { keep_audio_ = keep; }
  const std::vector<float>& audio_kept() const { return audio_kept_; }
  // Bytes of the stream's caches (the rings and buffers), for memory figures.
  size_t cache_bytes() const;
  // Contexts started so far (1 after the first audio).
  int contexts() const { return contexts_; }
  // The slots of a context's start every context restores (those whose frames lie
  // wholly in the silence in front: encoded, and the prompt decoded over them, once
  // per stream); 0 before the first context.
  int context_start_slots() const;

 private:
  void start_context();
  // The context's first slots that need no audio (those whose mel frames lie in the
  // silence in front), encoded and decoded once per stream and restored by every
  // context after: the encoder's and the decoder's positions over them.
  std::shared_ptr<const ContextStart> compute_context_start();
  void restore_context_start();
  void compute_frames(bool closed);
  // The prompt's positions [first, first + n) (the slots' embeddings at the front of
  // audio_); `take`: the last one's token is the context's first.
  void decode_prompt_rows(int first, int n, bool take, std::vector<TokenEmission>& out);
  void append_signal(std::span<const float> samples);
  void advance(bool closed, std::vector<TokenEmission>& out);
  void encode(int slots);
  void decode_prompt(std::vector<TokenEmission>& out);
  void decode_step(std::vector<TokenEmission>& out);
  void take_token(std::span<const float> logits, std::vector<TokenEmission>& out);
  // The slot's token under the boost, moving the match on.
  int boosted_choice(std::span<const float> logits);
  void restart_after_end(std::vector<TokenEmission>& out, bool closed);
  void trim_signal();

  std::shared_ptr<const Model> model_;
  StreamOptions options_;
  int delay_;
  int prompt_len_;
  std::shared_ptr<const std::vector<float>> scales_;  // [n_layer][d]
  ggml_backend_ptr own_backend_;
  ggml_backend_t backend_;
  GraphKernels kernels_;
  int min_encoder_slots_;
  std::unique_ptr<runtime::GraphRunner> runner_;
  LogMel log_mel_;
  features::RealFft::Workspace fft_workspace_;
  std::unique_ptr<KvRing> enc_ring_, dec_ring_;
  std::shared_ptr<const ContextStart> context_start_;
  bool prompted_ = false;  // the context's prompt is decoded

  // The context's signal (its samples from signal_first_ on, the left padding included).
  bool active_ = false;
  bool reset_ = false;
  std::vector<float> signal_;
  int64_t signal_first_ = 0, signal_end_ = 0;
  int64_t audio_end_ = 0;        // where the context's audio ends (the right padding after it is not audio)
  int64_t segment_slot0_ = 0;    // the context's slot where the segment's slot 0 is (frames count from it)
  int64_t mel_done_ = 0;         // frames computed
  std::vector<float> mel_;       // computed frames not yet encoded, [frame][n_mels]
  std::vector<float> mel_prev_;  // the 2 frames before them
  std::vector<float> conv0_prev_;
  int64_t slots_encoded_ = 0;
  std::deque<std::vector<float>> audio_;  // embeddings of slots encoded, not yet decoded
  int64_t positions_ = 0;                 // decoded
  int last_token_ = 0;
  std::shared_ptr<const TokenBoost> boost_;  // null: the model's own choices
  int boost_state_ = 0;                      // the phrase match under way (0: none)
  bool ended_ = false;                       // the model said EOS
  int contexts_ = 0;
  std::vector<float> logits_;
  std::function<void(const PositionOutput&)> observer_;
  bool keep_audio_ = false;
  std::vector<float> audio_kept_;
  std::vector<ggml_fp16_t> mask_scratch_;
};

// The reference's right padding of a segment of n samples: zeros to the next
// slot, then delay + 1 + 10 slots (mistral-common's n_right_pad_tokens).
int64_t right_padding(const Hparams& hp, int delay, int64_t samples);

}  // namespace earshot::voxtral

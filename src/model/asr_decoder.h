// What streaming policies need from an attention encoder-decoder ASR model, for
// one stream, in model-neutral terms. The Whisper engine implements it (model/whisper/session.h); tests
// implement it with scripted doubles. The model behind it is shared and
// immutable; an AsrDecoder holds the per-stream state (encoder output, cross
// K/V, self-attention KV cache) and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/asr_text.h"

namespace earshot {

struct DecodeRequest {
  // tokens[s] is appended to sequence s; every sequence gets the same count.
  std::vector<std::vector<int32_t>> tokens;
  // Positions (indices into the appended tokens) whose logits are wanted.
  // Empty = only the last appended position.
  std::vector<int> logits_positions;
  // Whether to return the alignment-head cross-attention.
  bool want_attention = true;
  // Logits only for token ids [0, vocabulary_limit); 0 = the whole vocabulary.
  // A caller that suppresses every token from some id on (Whisper's timestamps)
  // skips their rows of the vocabulary product, the largest matrix of a step.
  int vocabulary_limit = 0;
};

struct DecodeResult {
  int n_sequences = 0;
  int n_tokens = 0;     // tokens appended per sequence
  int n_positions = 0;  // positions with logits (see DecodeRequest::logits_positions)
  int n_vocab = 0;      // logits per position: the request's vocabulary_limit, or the whole vocabulary
  int n_heads = 0;      // alignment heads
  int n_frames = 0;     // encoder frames attended over
  // [n_sequences][n_positions][n_vocab]
  std::vector<float> logits;
  // Cross-attention weights after softmax over frames, of the alignment heads:
  // [n_sequences][n_heads][n_tokens][n_frames]. Empty unless want_attention.
  std::vector<float> attention;

  const float* logits_at(int sequence, int position = 0) const {
    return logits.data() + (static_cast<size_t>(sequence) * n_positions + position) * n_vocab;
  }
  const float* attention_at(int sequence, int head, int token) const {
    return attention.data() + ((static_cast<size_t>(sequence) * n_heads + head) * n_tokens + token) * n_frames;
  }
};

class AsrDecoder {
 public:
  virtual ~AsrDecoder() = default;

  // The model's vocabulary and prompt conventions (shared, immutable).
  virtual const AsrText& text() const = 0;
  virtual int n_text_ctx() const = 0;
  virtual int n_alignment_heads() const = 0;
  // Encoder frames per second of audio (50 for Whisper, 12.5 for Qwen3-ASR).
  virtual double frames_per_second() const = 0;
  // Longest audio one encoder pass takes, in samples at 16 kHz (30 s for Whisper).
  virtual int max_samples() const = 0;

  // Encodes 16 kHz mono audio (at most max_samples()); computes the cross-attention
  // K/V once for all later decode calls and clears the self-attention cache.
  // Returns the number of encoder frames that hold real audio (content length).
  virtual int encode(std::span<const float> pcm) = 0;

  // Clears the self-attention cache and sets the number of parallel sequences (beams).
  virtual void reset(int n_sequences) = 0;
  // Tokens held in the self-attention cache of each sequence.
  virtual int n_past() const = 0;
  // Truncates every sequence's cache to its first n_past tokens.
  virtual void rollback(int n_past) = 0;
  // Beam bookkeeping: sequence i continues from the cache of sequence source[i].
  virtual void reorder(std::span<const int> source) = 0;

  // Appends the tokens at position n_past() and runs the decoder (one graph for
  // all sequences). Throws kInvalidArgument beyond n_text_ctx.
  virtual DecodeResult decode(const DecodeRequest& request) = 0;

  // Language probabilities (index i = the language text().language_code(i)) from
  // one decoder step at the start of a transcription over the last encoded audio.
  // Leaves the self-attention cache as it was. Multilingual models only.
  virtual std::vector<float> detect_language() = 0;
};

}  // namespace earshot

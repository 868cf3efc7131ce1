// `earshot bench --workload reference`: a compute-realistic stream on random
// weights. Random weights never stop decoding (every pass runs to the token
// budget), so the bench's compute figures would say nothing about a real model.
// Here the model runs every real graph (encoder passes, decoder steps with their
// prompts and KV cache), but the token each step chooses is the reference
// transcript's, released as the audio reaches it:
//
//  * Word times are estimated: the reference's words are spread over the VAD's
//    speech segments (Silero, the server's settings) in proportion to their
//    character length plus one (the gap), as if speech were uttered at a
//    constant character rate; within a word its k-th of n tokens is placed at
//    start + k/n of its span. Times are clamped 0.12 s before the end of the
//    audio so the last pass's 4-frame border never holds the last word back,
//    and a segment's words end 40 ms before it: the live VAD's end of it falls
//    up to a window either side of the offline one, and a flush there must find
//    the segment's last word whole.
//  * ReferenceDecoder (an AsrDecoder decorator the bench installs through
//    engine::StreamRequest::wrap_decoder; no product code path has it) forwards
//    every call to the real decoder, then overwrites the result: the logits make
//    the next reference token the clear argmax (log-probability ~0), and the
//    alignment-head attention of the chosen position peaks at the token's time,
//    so the policy's own rules decide what is committed: AlignAtt's border
//    (a token attending within --frame-threshold frames of the audio end stops
//    the pass and is held back) and LocalAgreement's agreement of two passes.
//  * A word is offered only once its whole span has arrived; a word the audio
//    has only begun is offered attending the audio end (AlignAtt: held at the
//    border) or not at all (LocalAgreement: the pass ends); a word not begun
//    ends the pass (end of text; at the first step: no-speech).
//  * Where a pass starts in the reference is read from the prompt the policy
//    builds (its context and forced prefix are reference tokens already
//    committed), so the decorator holds no policy state of its own.
//
// What it models: the number and size of encoder passes, decoder steps per
// pass (prompt length, forced prefix, tokens decoded), KV cache use, and the
// policy's commit latency given plausible word times. What it does not: real
// model errors, hallucinations and repetitions (WER is 0 by construction),
// beam search (greedy only), how a real model's attention spreads (the peak is
// exact), words a real model would emit before their end, or the real timing
// of speech within a VAD segment (speaking rate varies). Tokens a Whisper model
// never chooses (its suppressed list) are dropped from the reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/asr_decoder.h"
#include "policy/online_processor.h"

namespace earshot::vad {
class VadModel;
}

namespace earshot::bench {

struct SpeechSpan {
  double start = 0, end = 0;  // seconds
};

struct TimedWord {
  std::string text;  // without spaces
  double start = 0, end = 0;
};

// Speech segments of a whole file by Silero VAD with the server's settings.
std::vector<SpeechSpan> speech_segments(std::shared_ptr<const vad::VadModel> model, std::span<const float> samples);

// The reference's whitespace-separated words over `speech` (no speech: the whole
// audio), each span shortened by 40 ms at its end (at most half of it), in
// proportion to their length + 1, clamped to [0, audio_seconds - 0.12].
std::vector<TimedWord> estimate_word_times(const std::string& reference, const std::vector<SpeechSpan>& speech,
                                           double audio_seconds);

// The reference as a model's tokens: `words` joined with a space before each,
// encoded whole; each token belongs to the word holding its first byte, and the
// k-th of a word's n tokens is placed at start + k/n of its span. Tokens `keep`
// refuses are left out (a Whisper model's suppressed tokens).
struct ReferenceTokens {
  std::vector<int32_t> tokens;
  std::vector<double> time, word_start, word_end;  // per token
};
ReferenceTokens reference_tokens(const std::vector<TimedWord>& words,
                                 const std::function<std::vector<int32_t>(const std::string&)>& encode,
                                 const std::function<std::string(int32_t)>& decode,
                                 const std::function<bool(int32_t)>& keep);

// Where a pass starts in the reference: the prompt's text tokens (context, then
// the forced prefix) are reference tokens already committed, so the pass goes on
// after the longest suffix of them found in the reference (the earliest such
// place at or after the last); with none found, where the furthest pass got.
struct ReferencePlace {
  size_t floor = 0, known_end = 0;
  size_t locate(const std::vector<int32_t>& reference, const std::vector<int32_t>& history);
};

// How a word the audio has begun but not finished is offered.
enum class PartialWord {
  kHoldAtBorder,  // offered attending the audio end (AlignAtt's border holds it back)
  kEndOfText,     // not offered: the pass ends (LocalAgreement)
};

// The audio a stream has received so far, shared by the stream's two wrappers.
struct FedAudio {
  double seconds = 0;
};

class ReferenceDecoder : public AsrDecoder {
 public:
  // Tokenises `words` with inner's vocabulary (the exact encoding of the text
  // joined by single spaces, with a leading space as Whisper writes it).
  ReferenceDecoder(std::unique_ptr<AsrDecoder> inner, std::vector<TimedWord> words, std::shared_ptr<FedAudio> fed,
                   PartialWord partial);

  const AsrText& text() const override { return inner_->text(); }
  int n_text_ctx() const override { return inner_->n_text_ctx(); }
  int n_alignment_heads() const override { return inner_->n_alignment_heads(); }
  double frames_per_second() const override { return inner_->frames_per_second(); }
  int max_samples() const override { return inner_->max_samples(); }
  int encode(std::span<const float> pcm) override;
  // Stream time of the audio of the last encoder pass.
  double buffer_start() const { return buffer_start_; }
  double buffer_end() const { return buffer_end_; }
  // Throws kInvalidArgument for more than one sequence: the workload is greedy.
  void reset(int n_sequences) override;
  int n_past() const override { return inner_->n_past(); }
  void rollback(int n_past) override { inner_->rollback(n_past); }
  void reorder(std::span<const int> source) override { inner_->reorder(source); }
  DecodeResult decode(const DecodeRequest& request) override;
  std::vector<float> detect_language() override { return inner_->detect_language(); }

  // The reference as tokens (what the decoder releases), and each token's time.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<double>& token_times() const { return token_time_; }

 private:
  void locate(std::span<const int32_t> prompt);
  void fill(DecodeResult& result, int32_t token, double time, bool no_speech) const;

  std::unique_ptr<AsrDecoder> inner_;
  std::shared_ptr<FedAudio> fed_;
  PartialWord partial_;
  std::vector<int32_t> tokens_;
  std::vector<double> token_time_, word_start_, word_end_;
  int32_t filler_ = -1;  // a whitespace token, for a first step with nothing to say
  double buffer_start_ = 0, buffer_end_ = 0;
  int content_frames_ = 0;
  ReferencePlace place_;   // where prompts were last found in tokens_
  size_t cursor_ = 0;      // next reference token of this pass
  bool derailed_ = false;  // the policy chose something else: end the pass
};

// OnlineProcessor decorator that records the stream time of the audio inserted
// (ReferenceDecoder reads it to place each encoder pass on the stream clock).
class FedAudioProcessor : public OnlineProcessor {
 public:
  FedAudioProcessor(std::unique_ptr<OnlineProcessor> inner, std::shared_ptr<FedAudio> fed)
      : inner_(std::move(inner)), fed_(std::move(fed)) {}
  void insert_audio(std::span<const float> samples, double stream_end_time) override {
    fed_->seconds = stream_end_time;
    inner_->insert_audio(samples, stream_end_time);
  }
  ProcessResult process(bool is_last) override { return inner_->process(is_last); }
  std::vector<Word> provisional() const override { return inner_->provisional(); }
  std::vector<Word> hypothesis() const override { return inner_->hypothesis(); }
  ProcessResult start_silence() override { return inner_->start_silence(); }
  void end_silence(double duration, double offset) override {
    fed_->seconds = std::max(fed_->seconds, offset);
    inner_->end_silence(duration, offset);
  }
  ProcessResult finish() override { return inner_->finish(); }
  void prepare_flush() override { inner_->prepare_flush(); }
  void warmup() override {
    inner_->warmup();
    fed_->seconds = 0;
  }
  std::string language() const override { return inner_->language(); }

 private:
  std::unique_ptr<OnlineProcessor> inner_;
  std::shared_ptr<FedAudio> fed_;
};

class TransducerReference;
class PromptedReference;

struct ReferenceStream {
  std::unique_ptr<OnlineProcessor> processor;
  const ReferenceDecoder* decoder = nullptr;  // owned by the processor
  // An audio-LLM decoder's instead (prompted_reference.h: Qwen3-ASR), owned by the processor.
  const PromptedReference* prompted = nullptr;
  // A streaming transducer's steer instead (transducer_reference.h), owned by the processor.
  const TransducerReference* transducer = nullptr;
};

// A stream of `engine` whose decoder is a ReferenceDecoder over `words` (the
// policy's hold-back mode chosen from request.policy; a wrap_decoder the
// request has wraps the model's decoder first), for an audio-LLM decoder
// (Qwen3-ASR's AlignAtt) a PromptedReference, or, for a cache-aware streaming
// transducer, whose greedy choices a TransducerReference makes. Throws
// kUnsupported for any other model or policy (an offline transducer, Qwen3-ASR's
// rolling mode).
ReferenceStream open_reference_stream(const engine::Engine& engine, engine::StreamRequest request,
                                      std::vector<TimedWord> words);

}  // namespace earshot::bench

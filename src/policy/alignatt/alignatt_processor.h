// AlignAtt (SimulStreaming) over an AsrDecoder: re-encode the buffered audio on
// every pass, force the tokens already committed for this buffer, decode new
// tokens until the alignment-head attention of the newest token reaches the end
// of the audio (border) or jumps back (rewind), and commit what came before.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/asr_decoder.h"
#include "policy/alignatt/alignatt_config.h"
#include "policy/alignatt/alignment.h"
#include "policy/alignatt/pass_trace.h"
#include "policy/decoding/token_decoder.h"
#include "policy/processor_base.h"

namespace earshot::policy {

class AlignAttProcessor : public ProcessorBase {
 public:
  // decoder: this stream's state over the shared model.
  AlignAttProcessor(std::unique_ptr<AsrDecoder> decoder, AlignAttConfig config);

  void insert_audio(std::span<const float> samples, double stream_end_time) override;
  ProcessResult process(bool is_last = false) override;
  void end_silence(double duration, double offset) override;
  // Encodes the buffer now, so that the flush that follows with no audio
  // inserted between (start_silence, finish) only decodes: the encoder pass is
  // most of a flush, and the VAD's pending end leaves time for it.
  void prepare_flush() override;
  void warmup() override;

  // Introspection for tests and tools.
  double buffered_seconds() const { return static_cast<double>(buffered_samples_) / kSampleRate; }
  std::vector<int32_t> context_tokens() const;  // static prompt + scrolled context
  const std::vector<std::vector<int32_t>>& committed_blocks() const { return committed_blocks_; }
  int last_attend_frame() const { return last_attend_frame_; }

 private:
  struct TimedToken {
    int32_t token;
    double time;
    float logprob;
  };
  struct Pass {
    std::vector<TimedToken> tokens;  // kept new tokens
    std::vector<double> step_times;  // time of every step's top token, kept or not
    StopReason stop = StopReason::kEndOfText;
    std::vector<PassTrace::Token> decoded;  // every step's top token, when tracing
  };

  void reset_all();
  void reset_segment();
  // The buffered audio, at most one encoder pass of it.
  std::vector<float> buffer_pcm() const;
  // Encodes buffer_pcm(); returns the content frames (whole frames of audio).
  int encode_buffer();
  void add_chunk(std::vector<float> chunk);
  void trim_front(double seconds);
  void trim_context();
  std::vector<int32_t> build_prompt(bool with_language, int& sot_index) const;
  Pass decode_pass(const std::vector<int32_t>& prompt, int sot_index, int content_len, bool is_last);
  std::vector<Word> commit(const Pass& pass, bool is_last, PassTrace& trace);
  std::vector<Word> to_words(const std::vector<TimedToken>& tokens, bool keep_incomplete) const;
  size_t repetition_cut(const std::vector<Word>& fresh) const;
  double frame_time(int frame) const;
  void warn(const std::string& message) const;

  std::unique_ptr<AsrDecoder> asr_;
  const AsrText& text_;
  AlignAttConfig config_;
  int max_context_tokens_;
  std::vector<int32_t> static_tokens_;
  std::vector<int32_t> init_tokens_;
  std::vector<int32_t> suppress_tokens_;
  std::vector<int32_t> blank_tokens_;
  std::unique_ptr<TokenDecoder> token_decoder_;
  AlignmentAccumulator alignment_;

  // Per-stream state.
  std::deque<std::vector<float>> chunks_;
  size_t buffered_samples_ = 0;
  // A flush's encoder pass run ahead (prepare_flush): its content frames, kept
  // while the buffer is what was encoded; any change or pass drops it.
  std::optional<int> prepared_content_;
  std::vector<int32_t> context_;                        // scrolled history (trimmable)
  std::vector<std::vector<int32_t>> committed_blocks_;  // forced prefix, one block per pass
  std::vector<TimedToken> pending_;                     // committed tokens of an incomplete UTF-8 word
  int last_attend_frame_ = 0;
  std::optional<double> first_timestamp_;
  double last_committed_end_ = -1e300;
  std::optional<double> stale_until_;  // stale guard armed by a segment reset: the last end before it
  long passes_ = 0;
};

}  // namespace earshot::policy

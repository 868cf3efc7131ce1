// LocalAgreement-2 (whisper_streaming): re-transcribe the whole buffer on every
// pass with the committed text as prompt, and commit the longest common prefix
// of the last two hypotheses. The buffer is cut at committed sentence ends once
// it is longer than buffer_trimming_sec.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/asr_decoder.h"
#include "model/asr_text.h"
#include "policy/processor_base.h"

namespace earshot::policy {

struct LocalAgreementConfig {
  std::string language = "auto";  // a code or "auto" (detected on every pass)
  Task task = Task::kTranscribe;
  double buffer_trimming_sec = 15.0;    // cut the buffer at a committed sentence end beyond this
  double buffer_hard_limit_sec = 25.0;  // cut at the last committed word beyond this (the encoder sees 30 s)
  size_t prompt_chars = 200;            // committed text before the buffer given as prompt
  // Always first in the prompt, never trimmed (the stream's vocabulary, as AlignAtt's
  // static_init_prompt); at most half the text context.
  std::string static_prompt;
  int min_token_budget = 50;  // loop guard per pass: max(this, seconds * tokens_per_second_budget)
  double tokens_per_second_budget = 22.5;
  double long_silence = 5.0;
  void validate() const;  // throws earshot::Error(kInvalidArgument)
};

class LocalAgreementProcessor : public ProcessorBase {
 public:
  LocalAgreementProcessor(std::unique_ptr<AsrDecoder> decoder, LocalAgreementConfig config);

  void insert_audio(std::span<const float> samples, double stream_end_time) override;
  ProcessResult process(bool is_last = false) override;
  void end_silence(double duration, double offset) override;
  void warmup() override;

  double buffered_seconds() const { return static_cast<double>(audio_.size()) / kSampleRate; }

  // One greedy transcription of the buffer with word times (exposed for tests).
  std::vector<Word> transcribe(const std::vector<int32_t>& prompt_tokens);

 private:
  // The static prompt, then committed text before the buffer (the newest, within half the context).
  std::vector<int32_t> prompt_tokens() const;
  void insert_hypothesis(std::vector<Word> words);
  std::vector<Word> flush();
  void cut_buffer_at(double time);
  void trim_buffer();
  std::vector<Word> commit_all();
  void append_committed(std::vector<Word>& words);

  std::unique_ptr<AsrDecoder> asr_;
  const AsrText& text_;
  LocalAgreementConfig config_;
  std::vector<int32_t> static_tokens_;

  std::vector<float> audio_;
  // provisional_ is whisper_streaming's hypothesis buffer: the previous hypothesis minus what got committed.
  std::vector<Word> committed_in_buffer_;  // committed words still inside the audio buffer
  std::vector<Word> new_;                  // latest hypothesis after the committed part
  double last_committed_time_ = 0;
};

}  // namespace earshot::policy

// `earshot bench --workload reference` for an audio-LLM decoder (model/prompted_asr.h:
// Qwen3-ASR with its AlignAtt): the model's real graphs, a real model's pacing.
// Random weights never end a pass early (every pass runs to its token budget) and
// their attention peaks anywhere, so a capacity run on them measures junk. Here
// the encoder, every prefill and every step run as the model's own (their
// prompts, KV reuse and attention rows computed), but the tokens are the
// reference transcript's, and the alignment heads' most attended audio token is
// the one that holds the token's estimated time (reference_workload.h: words
// spread over the VAD's speech segments), so the policy's own rules (the border,
// the rewind, the token budget) decide what is committed and when:
//
//  * A prefill continues the reference after the committed tokens the prompt
//    carries (ReferencePlace); without a forced language the first pass names it
//    ("language English<asr_text>": the bench's data are English).
//  * A token is chosen once its whole word has arrived; a word the audio has
//    only begun, or none left, ends the pass (the end token). A step reports, for
//    the token it was given, the audio token at that token's time (a header token:
//    the next reference token's), which AlignAtt reads as where the token attends.
//  * A token the policy feeds that is not the reference's ends the pass.
//
// What it models: encoder passes over the policy's buffer (and the windows they
// keep), prompts and their KV reuse, decoder steps per pass at the reference's
// speaking rate, and the policy's commit latency given plausible word times.
// What it does not: real model errors (WER is 0 by construction), how a real
// model's attention spreads, or the real timing of speech within a VAD segment.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/reference_workload.h"
#include "model/prompted_asr.h"

namespace earshot::bench {

class PromptedReference : public PromptedAsrDecoder {
 public:
  PromptedReference(std::unique_ptr<PromptedAsrDecoder> inner, std::vector<TimedWord> words,
                    std::shared_ptr<FedAudio> fed);

  int encode(std::span<const float> pcm) override;
  int32_t prefill(const PromptedRequest& request) override;
  int32_t step(int32_t token) override;
  const std::vector<int>& step_frames() const override { return frames_; }
  void end_pass() override { inner_->end_pass(); }
  int window_samples() const override { return inner_->window_samples(); }
  bool is_end(int32_t token) const override { return inner_->is_end(token); }
  int32_t text_marker() const override { return inner_->text_marker(); }
  std::string detokenize(std::span<const int32_t> tokens) const override { return inner_->detokenize(tokens); }
  std::vector<int32_t> tokenize(const std::string& text) const override { return inner_->tokenize(text); }
  int32_t end_token() const override { return inner_->end_token(); }
  bool supports_language(const std::string& code) const override { return inner_->supports_language(code); }
  std::string language_of_header(const std::string& header) const override {
    return inner_->language_of_header(header);
  }

  // The reference as tokens, and each token's time; the stream time of the last encode's audio.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<double>& token_times() const { return token_time_; }
  double buffer_start() const { return buffer_start_; }
  double buffer_end() const { return buffer_end_; }

 private:
  int32_t choose();  // the next token of the pass, and the time its step will report
  int frame_at(double time) const;

  std::unique_ptr<PromptedAsrDecoder> inner_;
  std::shared_ptr<FedAudio> fed_;
  std::vector<int32_t> tokens_;
  std::vector<double> token_time_, word_end_;
  std::vector<int32_t> header_;  // "language English<asr_text>"
  double buffer_start_ = 0, buffer_end_ = 0;
  int n_audio_ = 0;
  ReferencePlace place_;
  size_t cursor_ = 0;       // the next reference token of this pass
  size_t header_at_ = 0;    // header tokens still to say (index into header_)
  int32_t chosen_ = -1;     // the last token returned
  double chosen_time_ = 0;  // the time its step reports
  bool chosen_is_reference_ = false;
  bool derailed_ = false;
  std::vector<int> frames_;
};

}  // namespace earshot::bench

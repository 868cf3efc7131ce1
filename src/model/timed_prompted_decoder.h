// A PromptedAsrDecoder decorator that forwards every call and reports the wall
// time of each model pass (model_pass.h): encode() as an encoder pass, prefill()
// and step() as decoder passes, as TimedDecoder does for AsrDecoder. The
// Qwen3-ASR engine installs it when a stream asks for pass reports (the bench's
// compute figures, the server's /metrics), so the policies stay untouched.
#pragma once

#include <chrono>
#include <memory>

#include "model/model_pass.h"
#include "model/prompted_asr.h"

namespace earshot {

class TimedPromptedDecoder : public PromptedAsrDecoder {
 public:
  TimedPromptedDecoder(std::unique_ptr<PromptedAsrDecoder> inner, PassReport report)
      : inner_(std::move(inner)), report_(std::move(report)) {}

  int encode(std::span<const float> pcm) override {
    Timer t(report_, ModelPass::kEncoder);
    return inner_->encode(pcm);
  }
  int32_t prefill(const PromptedRequest& request) override {
    Timer t(report_, ModelPass::kDecoder);
    return inner_->prefill(request);
  }
  int32_t step(int32_t token) override {
    Timer t(report_, ModelPass::kDecoder);
    return inner_->step(token);
  }
  const std::vector<int>& step_frames() const override { return inner_->step_frames(); }
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

 private:
  // Reports on scope exit, whether the pass returned or threw (its time was spent).
  class Timer {
   public:
    Timer(const PassReport& report, ModelPass pass)
        : report_(report), pass_(pass), start_(std::chrono::steady_clock::now()) {}
    ~Timer() {
      report_(pass_, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_));
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    const PassReport& report_;
    ModelPass pass_;
    std::chrono::steady_clock::time_point start_;
  };

  std::unique_ptr<PromptedAsrDecoder> inner_;
  PassReport report_;
};

}  // namespace earshot

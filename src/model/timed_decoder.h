// An AsrDecoder decorator that forwards every call to another and reports the
// wall time of each model pass (model_pass.h): encode() as an encoder pass,
// decode() and detect_language() as decoder passes. An engine installs it when
// a stream asks for pass reports (the bench's per-stream ComputeStats, the
// server's /metrics counters), so neither touches the policies. A pass that
// throws is reported too: its time was spent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "model/asr_decoder.h"
#include "model/model_pass.h"

namespace earshot {

class TimedDecoder : public AsrDecoder {
 public:
  using Pass = ModelPass;
  using Report = PassReport;

  TimedDecoder(std::unique_ptr<AsrDecoder> inner, Report report)
      : inner_(std::move(inner)), report_(std::move(report)) {}

  const AsrText& text() const override { return inner_->text(); }
  int n_text_ctx() const override { return inner_->n_text_ctx(); }
  int n_alignment_heads() const override { return inner_->n_alignment_heads(); }
  double frames_per_second() const override { return inner_->frames_per_second(); }
  int max_samples() const override { return inner_->max_samples(); }
  int encode(std::span<const float> pcm) override {
    Timer t(report_, Pass::kEncoder);
    return inner_->encode(pcm);
  }
  void reset(int n_sequences) override { inner_->reset(n_sequences); }
  int n_past() const override { return inner_->n_past(); }
  void rollback(int n_past) override { inner_->rollback(n_past); }
  void reorder(std::span<const int> source) override { inner_->reorder(source); }
  DecodeResult decode(const DecodeRequest& request) override {
    Timer t(report_, Pass::kDecoder);
    return inner_->decode(request);
  }
  std::vector<float> detect_language() override {
    Timer t(report_, Pass::kDecoder);
    return inner_->detect_language();
  }

 private:
  // Reports on scope exit, whether the pass returned or threw.
  class Timer {
   public:
    Timer(const Report& report, Pass pass) : report_(report), pass_(pass), start_(std::chrono::steady_clock::now()) {}
    ~Timer() {
      report_(pass_, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_));
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    const Report& report_;
    Pass pass_;
    std::chrono::steady_clock::time_point start_;
  };

  std::unique_ptr<AsrDecoder> inner_;
  Report report_;
};

}  // namespace earshot

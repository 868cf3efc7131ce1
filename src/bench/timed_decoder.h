// An AsrDecoder decorator that times the calls a policy makes: the stats hook
// of earshot's own systems (encoder time per pass, decoder time per pass,
// passes per audio second) without touching the policies or the engine.
// A pass = one encode(); decoder calls = decode() and detect_language().
#pragma once

#include <chrono>
#include <memory>

#include "bench/runner.h"
#include "model/asr_decoder.h"

namespace earshot::bench {

class TimedAsrDecoder : public AsrDecoder {
 public:
  TimedAsrDecoder(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ComputeStats> stats)
      : inner_(std::move(inner)), stats_(std::move(stats)) {
    stats_->available = true;
  }

  const whisper::Tokenizer& tokenizer() const override { return inner_->tokenizer(); }
  int n_text_ctx() const override { return inner_->n_text_ctx(); }
  int n_alignment_heads() const override { return inner_->n_alignment_heads(); }
  int frames_per_second() const override { return inner_->frames_per_second(); }
  int max_samples() const override { return inner_->max_samples(); }
  int encode(std::span<const float> pcm) override {
    const auto t0 = Clock::now();
    const int frames = inner_->encode(pcm);
    stats_->encoder_seconds += seconds_since(t0);
    stats_->encoder_passes++;
    return frames;
  }
  void reset(int n_sequences) override { inner_->reset(n_sequences); }
  int n_past() const override { return inner_->n_past(); }
  void rollback(int n_past) override { inner_->rollback(n_past); }
  void reorder(std::span<const int> source) override { inner_->reorder(source); }
  DecodeResult decode(const DecodeRequest& request) override {
    const auto t0 = Clock::now();
    DecodeResult r = inner_->decode(request);
    stats_->decoder_seconds += seconds_since(t0);
    stats_->decoder_calls++;
    return r;
  }
  std::vector<float> detect_language() override {
    const auto t0 = Clock::now();
    std::vector<float> p = inner_->detect_language();
    stats_->decoder_seconds += seconds_since(t0);
    stats_->decoder_calls++;
    return p;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  std::unique_ptr<AsrDecoder> inner_;
  std::shared_ptr<ComputeStats> stats_;
};

}  // namespace earshot::bench

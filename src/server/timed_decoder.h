// An AsrDecoder that forwards to another and adds up the wall time of encoder
// and decoder passes into counters shared by all sessions (for /metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "model/asr_decoder.h"
#include "server/server.h"

namespace earshot::server {

struct ModelCounters {
  std::atomic<uint64_t> encoder_nanos{0}, decoder_nanos{0}, encoder_passes{0}, decoder_passes{0};
  ModelTimes times() const {
    return {static_cast<double>(encoder_nanos.load()) * 1e-9, static_cast<double>(decoder_nanos.load()) * 1e-9,
            encoder_passes.load(), decoder_passes.load()};
  }
};

class TimedDecoder : public AsrDecoder {
 public:
  TimedDecoder(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ModelCounters> counters)
      : inner_(std::move(inner)), counters_(std::move(counters)) {}

  const whisper::Tokenizer& tokenizer() const override { return inner_->tokenizer(); }
  int n_text_ctx() const override { return inner_->n_text_ctx(); }
  int n_alignment_heads() const override { return inner_->n_alignment_heads(); }
  int frames_per_second() const override { return inner_->frames_per_second(); }
  int max_samples() const override { return inner_->max_samples(); }
  int encode(std::span<const float> pcm) override {
    Timer t(counters_->encoder_nanos, counters_->encoder_passes);
    return inner_->encode(pcm);
  }
  void reset(int n_sequences) override { inner_->reset(n_sequences); }
  int n_past() const override { return inner_->n_past(); }
  void rollback(int n_past) override { inner_->rollback(n_past); }
  void reorder(std::span<const int> source) override { inner_->reorder(source); }
  DecodeResult decode(const DecodeRequest& request) override {
    Timer t(counters_->decoder_nanos, counters_->decoder_passes);
    return inner_->decode(request);
  }
  std::vector<float> detect_language() override {
    Timer t(counters_->decoder_nanos, counters_->decoder_passes);
    return inner_->detect_language();
  }

 private:
  struct Timer {
    Timer(std::atomic<uint64_t>& nanos, std::atomic<uint64_t>& passes)
        : nanos_(nanos), start_(std::chrono::steady_clock::now()) {
      ++passes;
    }
    ~Timer() {
      nanos_ += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
    }
    std::atomic<uint64_t>& nanos_;
    std::chrono::steady_clock::time_point start_;
  };
  std::unique_ptr<AsrDecoder> inner_;
  std::shared_ptr<ModelCounters> counters_;
};

}  // namespace earshot::server

// Model pass times for /metrics: the shared timing decorator
// (model/timed_decoder.h) adding the wall time of encoder and decoder passes
// into counters shared by all sessions.
#pragma once

#include <atomic>
#include <memory>

#include "model/timed_decoder.h"
#include "server/config.h"

namespace earshot::server {

struct ModelCounters {
  std::atomic<uint64_t> encoder_nanos{0}, decoder_nanos{0}, encoder_passes{0}, decoder_passes{0};
  ModelTimes times() const {
    return {static_cast<double>(encoder_nanos.load()) * 1e-9, static_cast<double>(decoder_nanos.load()) * 1e-9,
            encoder_passes.load(), decoder_passes.load()};
  }
};

class TimedDecoder : public earshot::TimedDecoder {
 public:
  TimedDecoder(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ModelCounters> counters)
      : earshot::TimedDecoder(std::move(inner), [counters](Pass pass, std::chrono::nanoseconds elapsed) {
          const bool encoder = pass == Pass::kEncoder;
          ++(encoder ? counters->encoder_passes : counters->decoder_passes);
          (encoder ? counters->encoder_nanos : counters->decoder_nanos) += static_cast<uint64_t>(elapsed.count());
        }) {}
};

}  // namespace earshot::server

// Model pass times for /metrics: every stream's pass reports (model/model_pass.h)
// added into counters shared by all sessions.
#pragma once

#include <atomic>
#include <memory>

#include "model/model_pass.h"
#include "server/config.h"

namespace earshot::server {

struct ModelCounters {
  std::atomic<uint64_t> encoder_nanos{0}, decoder_nanos{0}, encoder_passes{0}, decoder_passes{0};
  ModelTimes times() const {
    return {static_cast<double>(encoder_nanos.load()) * 1e-9, static_cast<double>(decoder_nanos.load()) * 1e-9,
            encoder_passes.load(), decoder_passes.load()};
  }
};

// The pass report of a stream that counts into `counters` (engine::StreamRequest::on_pass).
inline PassReport count_passes(std::shared_ptr<ModelCounters> counters) {
  return [counters = std::move(counters)](ModelPass pass, std::chrono::nanoseconds elapsed) {
    const bool encoder = pass == ModelPass::kEncoder;
    ++(encoder ? counters->encoder_passes : counters->decoder_passes);
    (encoder ? counters->encoder_nanos : counters->decoder_nanos) += static_cast<uint64_t>(elapsed.count());
  };
}

}  // namespace earshot::server

// The bench's view of model passes: each stream's pass reports (model/model_pass.h,
// engine::StreamRequest::on_pass) counted into its ComputeStats. A pass = one
// encoder pass; decoder calls = decoder steps and language detections.
#pragma once

#include <memory>

#include "bench/runner.h"
#include "model/model_pass.h"

namespace earshot::bench {

// Marks `stats` available and returns the report that counts into it.
inline PassReport count_passes(std::shared_ptr<ComputeStats> stats) {
  stats->available = true;
  return [stats = std::move(stats)](ModelPass pass, std::chrono::nanoseconds elapsed) {
    const double seconds = std::chrono::duration<double>(elapsed).count();
    if (pass == ModelPass::kEncoder) {
      stats->encoder_seconds += seconds;
      stats->encoder_passes++;
    } else {
      stats->decoder_seconds += seconds;
      stats->decoder_calls++;
    }
  };
}

}  // namespace earshot::bench

// The stats hook of earshot's own systems in the bench: encoder time per pass,
// decoder time per pass, passes per audio second, counted into the stream's
// ComputeStats by the shared timing decorator (model/timed_decoder.h).
// A pass = one encode(); decoder calls = decode() and detect_language().
#pragma once

#include <memory>

#include "bench/runner.h"
#include "model/timed_decoder.h"

namespace earshot::bench {

class TimedAsrDecoder : public TimedDecoder {
 public:
  TimedAsrDecoder(std::unique_ptr<AsrDecoder> inner, std::shared_ptr<ComputeStats> stats)
      : TimedDecoder(std::move(inner), [stats](Pass pass, std::chrono::nanoseconds elapsed) {
          const double seconds = std::chrono::duration<double>(elapsed).count();
          if (pass == Pass::kEncoder) {
            stats->encoder_seconds += seconds;
            stats->encoder_passes++;
          } else {
            stats->decoder_seconds += seconds;
            stats->decoder_calls++;
          }
        }) {
    stats->available = true;
  }
};

}  // namespace earshot::bench

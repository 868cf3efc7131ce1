// The rolling mode of an audio-LLM ASR model (Qwen3-ASR's own streaming_transcribe,
// mlx_qwen3_asr and WhisperLiveKit's qwen3 backends): every pass re-encodes the
// whole segment and re-decodes it with the previous pass's tokens, minus the
// last few, forced as prefix (those last tokens are the likeliest to change as
// audio arrives); the first passes of a segment decode without a prefix. The
// hypothesis is the whole segment's text; the commit layer (RevisingProcessor)
// decides what is stable. Not the committed text as prefix: that would make the
// commit layer's hold-back moot and is not what the references do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/prompted_asr.h"
#include "policy/commit/revising_processor.h"

namespace earshot::policy::commit {

struct RollingConfig {
  int unfixed_passes = 2;  // passes of a segment decoded without prefix (the reference's unfixed_chunk_num)
  int unfixed_tokens = 5;  // tokens of the previous pass dropped from its end (the reference's unfixed_token_num)
  // System text always first in the context, before the earlier segments' transcript
  // (the stream's vocabulary); "" = none.
  std::string context{};
  void validate() const;  // throws earshot::Error(kInvalidArgument)
};

class RollingDecoder : public WindowDecoder {
 public:
  RollingDecoder(std::unique_ptr<PromptedAsrDecoder> decoder, RollingConfig config);

  WindowPass decode(const WindowRequest& request) override;

  const std::vector<int32_t>& last_prefix() const { return prefix_; }  // what the last pass forced

 private:
  std::unique_ptr<PromptedAsrDecoder> decoder_;
  RollingConfig config_;
  std::vector<int32_t> previous_;  // the last pass's output of this segment (its prefix + what it decoded)
  std::vector<int32_t> prefix_;
  std::string language_;  // named by the model, kept for the stream
};

}  // namespace earshot::policy::commit

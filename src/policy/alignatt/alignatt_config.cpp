#include "policy/alignatt/alignatt_config.h"

#include "common/error.h"

namespace earshot::policy {

namespace {
void require(bool ok, const std::string& message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, "AlignAtt setting " + message);
}
}  // namespace

void AlignAttConfig::validate() const {
  require(!language.empty(), "language must be a language code or \"auto\", got an empty string");
  require(frame_threshold >= 0, "frame_threshold must be >= 0, got " + std::to_string(frame_threshold));
  require(last_frame_threshold >= 0, "last_frame_threshold must be >= 0, got " + std::to_string(last_frame_threshold));
  require(rewind_threshold > 0, "rewind_threshold must be > 0, got " + std::to_string(rewind_threshold));
  require(audio_min_len >= 0, "audio_min_len must be >= 0 s, got " + std::to_string(audio_min_len));
  require(audio_max_len > 0 && audio_max_len <= 30.0,
          "audio_max_len must be in (0, 30] s (one encoder window), got " + std::to_string(audio_max_len));
  require(audio_min_len <= audio_max_len, "audio_min_len (" + std::to_string(audio_min_len) +
                                              " s) must not exceed audio_max_len (" + std::to_string(audio_max_len) +
                                              " s)");
  require(max_context_tokens == -1 || max_context_tokens >= 0,
          "max_context_tokens must be >= 0 or -1 (model default), got " + std::to_string(max_context_tokens));
  require(beams >= 1 && beams <= 16, "beams must be in [1, 16], got " + std::to_string(beams));
  require(nonspeech_prob >= 0 && nonspeech_prob <= 1,
          "nonspeech_prob must be in [0, 1], got " + std::to_string(nonspeech_prob));
  require(language_detect_after >= 0, "language_detect_after must be >= 0 s");
  require(max_pending_utf8_tokens >= 0, "max_pending_utf8_tokens must be >= 0");
  require(min_token_budget >= 1, "min_token_budget must be >= 1");
  require(tokens_per_second_budget > 0, "tokens_per_second_budget must be > 0");
  require(attention_window >= 0,
          "attention_window must be >= 1 or 0 (all decoder calls), got " + std::to_string(attention_window));
  require(stale_margin >= 0, "stale_margin must be >= 0");
  require(long_silence > 0, "long_silence must be > 0 s");
}

}  // namespace earshot::policy

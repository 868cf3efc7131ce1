// Settings of the AlignAtt policy (defaults from the SimulStreaming seeds).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/asr_text.h"

namespace earshot::policy {

struct AlignAttConfig {
  std::string language = "auto";  // a code ("en") or "auto"
  Task task = Task::kTranscribe;

  int frame_threshold = 25;              // border: stop when the token attends within this many frames of the end
  int last_frame_threshold = 4;          // the same on the last pass of a segment
  int rewind_threshold = 200;            // attention jumping back more than this discards the pass
  double audio_min_len = 0.0;            // seconds; below it a pass returns nothing
  double audio_max_len = 30.0;           // seconds; whole inserted chunks drop from the front beyond it
  int max_context_tokens = -1;           // cap on the carried text context; -1 = the model's n_text_ctx
  std::string static_init_prompt;        // always in the context, never trimmed
  std::string init_prompt;               // starts the scrolled context, trimmed like it
  int beams = 1;                         // 1 = greedy
  double nonspeech_prob = 0.5;           // P(<|nospeech|>) at SOT above it ends the pass; 1.0 = off
  bool never_fire = false;               // hold the last word of a pass until the next or last pass
  std::vector<int32_t> suppress_tokens;  // suppressed on every step besides the special tokens

  double language_detect_after = 2.0;  // seconds of audio after the first attended token before auto-detection
  int max_pending_utf8_tokens = 10;
  int min_token_budget = 50;  // per-pass loop guard: max(this, seconds * tokens_per_second_budget)
  double tokens_per_second_budget = 22.5;
  int attention_window = 16;  // decoder calls whose attention the alignment uses
  bool repetition_guard = true;
  double stale_margin = 0.05;  // a new word ending before last committed end + this is dropped
  double long_silence = 5.0;   // end_silence at or above it resets the segment

  // Warnings (dropped UTF-8 fragments, loop guards); nullptr prints to stderr.
  std::function<void(const std::string&)> on_warning;

  // Throws earshot::Error(kInvalidArgument) naming the bad setting.
  void validate() const;
};

}  // namespace earshot::policy

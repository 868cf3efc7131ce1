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

  int frame_threshold = 25;        // border: stop when the token attends within this many frames of the end
  int last_frame_threshold = 4;    // the same on the last pass of a segment
  int rewind_threshold = 200;      // attention jumping back more than this discards the pass
  double audio_min_len = 0.0;      // seconds; below it a pass returns nothing
  double audio_max_len = 30.0;     // seconds; whole inserted chunks drop from the front beyond it
  int max_context_tokens = -1;     // cap on the carried text context; -1 = the model's n_text_ctx
  std::string static_init_prompt;  // always in the context, never trimmed
  std::string init_prompt;         // starts the scrolled context, trimmed like it
  int beams = 1;                   // 1 = greedy
  // P(<|nospeech|>) at SOT above it ends the pass; 1.0 = off. WhisperLiveKit uses
  // 0.5 (kept here); SimulStreaming's default is 1.0 (the stop never fires).
  double nonspeech_prob = 0.5;
  bool never_fire = false;               // hold the last word of a pass until the next or last pass
  std::vector<int32_t> suppress_tokens;  // suppressed on every step besides the special tokens
  // Also suppress timestamp tokens (AsrText::text_vocabulary_end() on), which lets
  // a step skip their logits. Off as in SimulStreaming, which leaves them
  // choosable: a random-weight model does choose them, so suppression changes text.
  bool suppress_timestamps = false;

  double language_detect_after = 2.0;  // seconds of audio after the first attended token before auto-detection
  int max_pending_utf8_tokens = 10;
  double long_silence = 5.0;  // end_silence at or above it resets the segment

  // Decoder calls of a pass whose attention the alignment z-normalises over;
  // 0 = all of them (SimulStreaming); WhisperLiveKit and the MLX seed use 16.
  int attention_window = 0;

  // Guards: none exists in the reference; each only ever stops a pass early or
  // drops words from output and state together (docs/architecture.md, "AlignAtt for Whisper").
  // Token budget: a pass that reaches max(min_token_budget, seconds *
  // tokens_per_second_budget) decoder calls stops there and commits what it has.
  bool token_budget_guard = true;
  int min_token_budget = 50;
  double tokens_per_second_budget = 22.5;
  // Repetition: in a pass that ended at the token budget or the context limit, a
  // loop (find_repetition) is cut before its second repetition and the segment
  // restarts after the last kept word.
  bool repetition_guard = true;
  // Stale words: after a segment reset, leading new words that end before the
  // last word committed before it (+ stale_margin) are dropped from the output
  // and from the forced prefix.
  bool stale_guard = true;
  double stale_margin = 0.05;

  void set_guards(bool on) { token_budget_guard = repetition_guard = stale_guard = on; }

  // Warnings (dropped UTF-8 fragments, loop guards); nullptr prints to stderr.
  std::function<void(const std::string&)> on_warning;
  // One JSON line per decoding pass (pass_trace.h); nullptr = no trace (no cost).
  std::function<void(const std::string&)> on_trace;

  // Throws earshot::Error(kInvalidArgument) naming the bad setting.
  void validate() const;
};

}  // namespace earshot::policy

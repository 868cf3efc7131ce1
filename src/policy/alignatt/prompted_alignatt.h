// AlignAtt for audio-LLM ASR models (WhisperLiveKit's qwen3_simul, Qwen3-ASR): on every pass
// re-encode the buffered audio, prompt the decoder with it and the last
// committed tokens, decode greedily and, from the 3rd step on, stop when the
// median over the alignment heads of their most attended audio token comes
// within `border` tokens of the end of the audio (border = max(2, 0.15 x audio
// tokens)) or jumps back more than `rewind` (0.12 x audio tokens). What came
// before the stop is committed. Shares the UTF-8 hold (text_utils.h) and the
// text units of the commit layer (CJK characters as words) with the rest of policy/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/prompted_asr.h"
#include "policy/processor_base.h"

namespace earshot::policy {

struct PromptedAlignAttConfig {
  std::string language = "auto";  // a code, or "auto" (the model names it; kept for the session once named)
  double border_fraction = 0.15;
  double rewind_fraction = 0.12;
  int min_border = 2;           // border and rewind are at least this many audio tokens
  int checks_after_steps = 3;   // no border/rewind check before this many steps
  double audio_min_len = 0.5;   // seconds; below it a pass returns nothing
  double audio_max_len = 15.0;  // seconds; the front is trimmed beyond it
  // How the front goes. kWindow: whole encoder windows (the decoder's
  // window_samples(), 8 s for Qwen3-ASR), so the windows left and the model's work
  // on them stay valid; the buffer then holds audio_max_len - window to
  // audio_max_len. kSliding: the last audio_max_len at any sample (WhisperLiveKit's qwen3_simul),
  // which moves every window on every pass once the buffer is full. A decoder
  // without windows, or windows longer than audio_max_len, trims as kSliding.
  enum class Trim { kWindow, kSliding };
  Trim trim = Trim::kWindow;
  double min_chunk = 1.0;  // seconds of new audio between two passes (a last pass runs anyway)
  // A pass runs once min_chunk - min_chunk_slack seconds are new. A stream's VAD
  // hands speech on in whole windows (Silero's: 32 ms), so a client's 1 s chunk
  // reaches the policy as 0.992 or 1.024 s; with no slack (the seed's rule) the
  // shorter half wait for the next chunk and most passes come 2 s apart.
  double min_chunk_slack = 0.05;
  int max_context_tokens = 30;  // last committed tokens carried after the prompt
  std::string context;          // system text of the prompt
  // Token budget: ~6 tokens per second of speech; a last pass min(6 s + 10, 120),
  // others min(6 x max(new audio s, 1) + 5, 40) (the seed's numbers).
  double tokens_per_second = 6.0;
  int max_tokens_last = 120;
  int max_tokens = 40;
  int max_flush_passes = 5;  // last passes per flush while each runs into the budget
  // The seed lets the model name the language on every "auto" pass; true keeps the
  // first language named for the session and forces it (committed context then
  // always follows the same "language X<asr_text>" header).
  bool keep_detected_language = true;
  double long_silence = 5.0;
  void validate() const;  // throws earshot::Error(kInvalidArgument)
};

class PromptedAlignAttProcessor : public ProcessorBase {
 public:
  PromptedAlignAttProcessor(std::unique_ptr<PromptedAsrDecoder> decoder, PromptedAlignAttConfig config);

  void insert_audio(std::span<const float> samples, double stream_end_time) override;
  ProcessResult process(bool is_last = false) override;
  ProcessResult start_silence() override { return flush(); }
  ProcessResult finish() override { return flush(); }
  void end_silence(double duration, double offset) override;
  void warmup() override;

  // Introspection for tests.
  double buffered_seconds() const { return static_cast<double>(audio_.size()) / kSampleRate; }
  const std::vector<int32_t>& committed_tokens() const { return committed_tokens_; }
  int last_attend_frame() const { return last_attend_frame_; }
  enum class Stop { kEnd, kBudget, kBorder, kRewind, kNone };
  Stop last_stop() const { return last_stop_; }

  // The thresholds of a pass over n audio tokens.
  static int threshold(double fraction, int n_audio, int minimum);

 private:
  std::vector<Word> infer(bool is_last, double fresh_seconds);
  ProcessResult flush();
  std::vector<Word> to_words(const std::string& text, const std::vector<int>& token_frames, int n_audio);
  void reset_state();

  std::unique_ptr<PromptedAsrDecoder> asr_;
  PromptedAlignAttConfig config_;
  std::vector<float> audio_;
  size_t last_infer_samples_ = 0;
  std::vector<int32_t> committed_tokens_;
  size_t committed_words_ = 0;
  int last_attend_frame_ = 0;
  Stop last_stop_ = Stop::kNone;
};

}  // namespace earshot::policy

// What streaming policies need from an audio-LLM ASR model (an audio encoder
// whose output sits inside a text prompt of an LLM decoder, as Qwen3-ASR), for
// one stream, in model-neutral terms. The Qwen3-ASR family implements it
// (model/qwen3asr); tests implement it with scripted doubles. Greedy decoding;
// the alignment is the decoder's self-attention of chosen heads onto the audio
// tokens of the prompt.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"

namespace earshot {

struct PromptedRequest {
  std::string context;                 // system text
  std::string language;                // language *code* to force ("" = the model names it)
  std::vector<int32_t> prefix_tokens;  // committed tokens carried as context, after the prompt
};

class PromptedAsrDecoder {
 public:
  virtual ~PromptedAsrDecoder() = default;
  // Encodes 16 kHz mono audio; returns the number of audio tokens. The encoder
  // output is kept for every prefill until the next encode.
  virtual int encode(std::span<const float> pcm) = 0;
  // Clears the decoder state, decodes the prompt around the kept audio; returns the greedy first token.
  virtual int32_t prefill(const PromptedRequest& request) = 0;
  // Decodes `token`; returns the greedy next token. step_frames() then holds, per
  // alignment head, the audio token (0-based) the step attended to most.
  virtual int32_t step(int32_t token) = 0;
  virtual const std::vector<int>& step_frames() const = 0;
  // The pass (from its encode()) decodes no more. A decoder that batches several
  // streams' decodes (Qwen3-ASR with --batch-decode) holds the others' next batch
  // for a stream whose pass is under way, so that their prompts and steps go
  // together: a policy calls this when each pass ends, however it ends (PassScope).
  virtual void end_pass() {}
  // The encoder's window in samples, where the encoder's output for the audio of a
  // window depends on that window's audio only (Qwen3-ASR: 8 s); 0 when it has no
  // such windows. A buffer trimmed by whole windows from the front keeps its other
  // windows as they were, so what the model kept of earlier passes stays valid.
  virtual int window_samples() const { return 0; }

  virtual bool is_end(int32_t token) const = 0;  // end of the transcription
  virtual int32_t text_marker() const = 0;       // the token after which the transcript starts (<asr_text>)
  virtual std::string detokenize(std::span<const int32_t> tokens) const = 0;
  // Plain text (no special tokens) as the model's tokens, and the token that ends
  // a transcription: what a measurement tool needs to speak for the model (the
  // bench's reference workload). Throws Error(kUnsupported) where not offered.
  virtual std::vector<int32_t> tokenize(const std::string& /*text*/) const {
    throw Error(ErrorCode::kUnsupported, "this decoder does not tokenize text");
  }
  virtual int32_t end_token() const { throw Error(ErrorCode::kUnsupported, "this decoder names no end token"); }
  virtual bool supports_language(const std::string& code) const = 0;
  // The language code named by a decoded header ("language English" -> "en"); "" when none.
  virtual std::string language_of_header(const std::string& header) const = 0;
};

// A pass of a policy, from before its encode(): says it ended
// (PromptedAsrDecoder::end_pass) when it goes out of scope, however it returns or throws.
class PassScope {
 public:
  explicit PassScope(PromptedAsrDecoder& decoder) : decoder_(decoder) {}
  ~PassScope() { decoder_.end_pass(); }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  PromptedAsrDecoder& decoder_;
};

}  // namespace earshot

// libwhisper 1.9.1, the test oracle, as the developer tools run it: on the CPU,
// one context per model file and attention mode.
#pragma once

#include <whisper.h>

#include <span>
#include <string>

namespace earshot::tools {

// Silences libwhisper's log (and ggml's, which whisper_log_set routes too): its
// chatter would bury the tool's numbers.
void silence_libwhisper_log();

class LibWhisperContext {
 public:
  // Throws earshot::Error(kInvalidModel) when libwhisper cannot load the file.
  LibWhisperContext(const std::string& model_path, bool flash_attention);
  ~LibWhisperContext();
  LibWhisperContext(const LibWhisperContext&) = delete;
  LibWhisperContext& operator=(const LibWhisperContext&) = delete;

  whisper_context* get() const { return ctx_; }
  // libwhisper's own log-mel of the samples; throws earshot::Error(kInternal) on failure.
  void pcm_to_mel(std::span<const float> pcm, int threads);
  // Runs the encoder on the current mel; throws earshot::Error(kInternal) on failure.
  void encode(int threads);

 private:
  whisper_context* ctx_ = nullptr;
};

}  // namespace earshot::tools

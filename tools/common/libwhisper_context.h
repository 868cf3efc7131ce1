// libwhisper 1.9.1, the test oracle, as the developer tools run it: one context
// per model file and attention mode, on the CPU or on the same device as earshot.
#pragma once

#include <whisper.h>

#include <span>
#include <string>

namespace earshot::tools {

// One device for both engines of a tool (--device).
struct EngineDevice {
  std::string backend;   // earshot's whisper::LoadOptions::backend; empty = CPU
  int whisper_gpu = -1;  // libwhisper's gpu_device: the index among ggml's GPU devices; -1 = CPU
  const char* name() const { return backend.empty() ? "cpu" : backend.c_str(); }
};

// "cpu", or a ggml device name (CUDA0 in a CUDA build) that is a GPU. Throws
// earshot::Error(kInvalidArgument) naming the GPUs this build has otherwise.
EngineDevice find_engine_device(const std::string& name);

// Silences libwhisper's log (and ggml's, which whisper_log_set routes too): its
// chatter would bury the tool's numbers.
void silence_libwhisper_log();

class LibWhisperContext {
 public:
  // Throws earshot::Error(kInvalidModel) when libwhisper cannot load the file.
  // whisper_gpu: EngineDevice::whisper_gpu (-1: the CPU alone).
  LibWhisperContext(const std::string& model_path, bool flash_attention, int whisper_gpu = -1);
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

#include "tools/common/libwhisper_context.h"

#include <ggml-backend.h>

#include "common/error.h"

namespace earshot::tools {

EngineDevice find_engine_device(const std::string& name) {
  if (name == "cpu" || name == "CPU") return {};
  std::string gpus;
  int gpu_index = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    const enum ggml_backend_dev_type type = ggml_backend_dev_type(dev);
    // libwhisper counts both kinds of GPU when it picks its gpu_device.
    if (type != GGML_BACKEND_DEVICE_TYPE_GPU && type != GGML_BACKEND_DEVICE_TYPE_IGPU) continue;
    if (name == ggml_backend_dev_name(dev)) return {name, gpu_index};
    gpus += std::string(gpus.empty() ? "" : ", ") + ggml_backend_dev_name(dev);
    ++gpu_index;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "--device " + name + ": not a GPU of this build (it has: cpu" + (gpus.empty() ? "" : ", " + gpus) + ")");
}

void silence_libwhisper_log() {
  whisper_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
}

LibWhisperContext::LibWhisperContext(const std::string& model_path, bool flash_attention, int whisper_gpu) {
  whisper_context_params params = whisper_context_default_params();
  params.use_gpu = whisper_gpu >= 0;
  params.gpu_device = whisper_gpu >= 0 ? whisper_gpu : 0;
  params.flash_attn = flash_attention;
  ctx_ = whisper_init_from_file_with_params(model_path.c_str(), params);
  if (!ctx_) throw Error(ErrorCode::kInvalidModel, "libwhisper cannot load " + model_path);
}

LibWhisperContext::~LibWhisperContext() { whisper_free(ctx_); }

void LibWhisperContext::pcm_to_mel(std::span<const float> pcm, int threads) {
  if (whisper_pcm_to_mel(ctx_, pcm.data(), static_cast<int>(pcm.size()), threads) != 0) {
    throw Error(ErrorCode::kInternal, "whisper_pcm_to_mel failed");
  }
}

void LibWhisperContext::encode(int threads) {
  if (whisper_encode(ctx_, 0, threads) != 0) throw Error(ErrorCode::kInternal, "whisper_encode failed");
}

}  // namespace earshot::tools

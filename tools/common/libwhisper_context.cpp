#include "tools/common/libwhisper_context.h"

#include "common/error.h"

namespace earshot::tools {

void silence_libwhisper_log() {
  whisper_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
}

LibWhisperContext::LibWhisperContext(const std::string& model_path, bool flash_attention) {
  whisper_context_params params = whisper_context_default_params();
  params.use_gpu = false;
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

#include "cli/model_options.h"

#include <ggml-backend.h>

#include <string>

#include "common/error.h"

namespace earshot::cli {

void declare_model_options(Args& args) {
  args.option("device",
              "where the model runs: auto (the first GPU this build has, else the CPU), cpu, or a device "
              "from `earshot version` (e.g. CUDA0)",
              "auto");
  args.option("flash-attention",
              "fused attention in the encoder: on (about 40% faster on the CPU) or off (whisper.cpp's explicit "
              "softmax, bit-identical to libwhisper with flash attention off)",
              "on");
}

bool read_flash_attention(const Args& args) {
  const std::string value = args.get("flash-attention");
  if (value == "on") return true;
  if (value == "off") return false;
  throw Error(ErrorCode::kInvalidArgument, "--flash-attention must be on or off, not '" + value + "'");
}

whisper::LoadOptions read_model_options(const Args& args) {
  whisper::LoadOptions options;
  const std::string device = args.get("device");
  if (device == "cpu" || device == "CPU") return options;
  if (device == "auto") {
    if (ggml_backend_dev_t gpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU)) {
      options.backend = ggml_backend_dev_name(gpu);
    }
    return options;
  }
  if (ggml_backend_dev_by_name(device.c_str()) == nullptr) {
    std::string known;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
      known += std::string(known.empty() ? "" : ", ") + ggml_backend_dev_name(ggml_backend_dev_get(i));
    }
    throw Error(ErrorCode::kInvalidArgument,
                "--device " + device + ": no such device in this build (there are: " + known + ", or auto)");
  }
  options.backend = device;
  return options;
}

}  // namespace earshot::cli

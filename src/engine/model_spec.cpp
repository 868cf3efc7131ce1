#include "engine/model_spec.h"

#include "common/error.h"

namespace earshot::engine {

int check_batch_streams(const RuntimeOptions& runtime, int max, const std::string& unit) {
  const int batch = runtime.batch_streams;
  if (batch != 0 && (batch < 2 || batch > max)) {
    throw Error(ErrorCode::kInvalidArgument, "--batch-decode must be 0 (off) or 2.." + std::to_string(max) + " " +
                                                 unit + ", got " + std::to_string(batch));
  }
  return batch;
}

std::string describe_encoder_kernels(const RuntimeOptions& runtime) {
  if (runtime::resolve_cpu_kernels(runtime.cpu_kernels, runtime.device.empty()) == runtime::CpuKernels::kOpenBlas)
    return "OpenBLAS encoder";
  return runtime.flash_attention ? "flash attention" : "explicit-softmax attention";
}

}  // namespace earshot::engine

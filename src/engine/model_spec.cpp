#include "engine/model_spec.h"

namespace earshot::engine {

std::string describe_encoder_kernels(const RuntimeOptions& runtime) {
  if (runtime::resolve_cpu_kernels(runtime.cpu_kernels, runtime.device.empty()) == runtime::CpuKernels::kOpenBlas)
    return "OpenBLAS encoder";
  return runtime.flash_attention ? "flash attention" : "explicit-softmax attention";
}

}  // namespace earshot::engine

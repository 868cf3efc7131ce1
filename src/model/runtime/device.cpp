#include "model/runtime/device.h"

#include <ggml-cpu.h>

#include "common/error.h"

namespace earshot::runtime {

ggml_backend_dev_t cpu_device() {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) throw Error(ErrorCode::kInternal, "this ggml build has no CPU device");
  return cpu;
}

bool is_cpu(ggml_backend_dev_t device) {
  return device != nullptr && ggml_backend_dev_type(device) == GGML_BACKEND_DEVICE_TYPE_CPU;
}

std::string device_names() {
  std::string names;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    names += std::string(names.empty() ? "" : ", ") + ggml_backend_dev_name(ggml_backend_dev_get(i));
  }
  return names;
}

ggml_backend_dev_t resolve_device(std::string_view name, std::string_view label) {
  if (name.empty() || name == "cpu" || name == "CPU") return cpu_device();
  if (name == "auto") {
    ggml_backend_dev_t gpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    return gpu != nullptr ? gpu : cpu_device();
  }
  const std::string owned(name);
  if (ggml_backend_dev_t device = ggml_backend_dev_by_name(owned.c_str())) return device;
  throw Error(
      ErrorCode::kInvalidArgument,
      std::string(label) + " " + owned + ": no such device in this build (there are: " + device_names() + ", or auto)");
}

ggml_backend_ptr create_backend(ggml_backend_dev_t device, int n_threads) {
  if (n_threads < 1) {
    throw Error(ErrorCode::kInvalidArgument, "threads must be >= 1, got " + std::to_string(n_threads));
  }
  if (device == nullptr) device = cpu_device();
  ggml_backend_ptr backend(ggml_backend_dev_init(device, nullptr));
  if (!backend) {
    throw Error(ErrorCode::kInternal, std::string("cannot start the ggml backend ") + ggml_backend_dev_name(device));
  }
  set_threads(backend.get(), n_threads);
  return backend;
}

ggml_backend_dev_t device_of(ggml_backend_t backend) {
  return backend != nullptr ? ggml_backend_get_device(backend) : nullptr;
}

void set_threads(ggml_backend_t backend, int n_threads) {
  if (n_threads < 1) {
    throw Error(ErrorCode::kInvalidArgument, "threads must be >= 1, got " + std::to_string(n_threads));
  }
  if (backend != nullptr && ggml_backend_is_cpu(backend)) ggml_backend_cpu_set_n_threads(backend, n_threads);
}

}  // namespace earshot::runtime

// Where a model's weights live and its graphs compute: one ggml device, chosen by
// name the same way for every model family (Whisper, Silero VAD, the GGUF
// families) and every command (`--device`).
#pragma once

#include <ggml-backend.h>
#include <ggml-cpp.h>

#include <string>
#include <string_view>

namespace earshot::runtime {

// The device a name selects: "" / "cpu" / "CPU" the CPU; "auto" the first GPU
// ggml offers, else the CPU; anything else the ggml device of that name (ggml
// compares names case-insensitively: "cuda0" finds CUDA0). Never null. Throws
// earshot::Error(kInvalidArgument) "<label> NAME: no such device in this build
// (there are: CPU, CUDA0, or auto)" for an unknown name.
ggml_backend_dev_t resolve_device(std::string_view name, std::string_view label = "device");

// ggml's CPU device (always present).
ggml_backend_dev_t cpu_device();
bool is_cpu(ggml_backend_dev_t device);

// The names of every device of this build in ggml's order, "CPU" or "CUDA0, CPU".
std::string device_names();

// A backend on `device` (null: the CPU) with n_threads compute threads when it is
// the CPU. Throws earshot::Error(kInvalidArgument) for n_threads < 1 and
// kInternal "cannot start the ggml backend NAME" when ggml cannot start it.
ggml_backend_ptr create_backend(ggml_backend_dev_t device, int n_threads);

// The device of a backend the shared pieces created (never null for those).
ggml_backend_dev_t device_of(ggml_backend_t backend);

// Sets the compute threads of a CPU backend; other backends have no such knob.
void set_threads(ggml_backend_t backend, int n_threads);

}  // namespace earshot::runtime

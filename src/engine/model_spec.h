// What to load and how: the file, where and how it computes, the policy
// settings every stream starts from, and each family's own settings (opaque
// here: a family's folder defines its type, its registration reads it from the
// command line, its loader reads it from the spec). Names no model family.
#pragma once

#include <any>
#include <filesystem>
#include <map>
#include <string>

#include "model/runtime/openblas_ops.h"
#include "policy/registry.h"

namespace earshot::engine {

struct RuntimeOptions {
  std::string device;  // a ggml device name; "" = the CPU
  int threads = 4;     // CPU threads per model pass
  bool flash_attention = true;
  // The encoders' products: OpenBLAS where it loads on the CPU (auto), or as asked.
  runtime::CpuKernels cpu_kernels = runtime::CpuKernels::kAuto;
  // Model steps of up to this many streams pending at once run as one graph,
  // shared by the engine's streams (Whisper's decoder steps, a cache-aware
  // streaming transducer's chunks, Qwen3-ASR's prompts and steps, Voxtral's
  // decoder steps); 0 = every step alone. Each family that batches validates it
  // (check_batch_streams); engine::load refuses it for an engine that does not batch.
  int batch_streams = 0;
};

// A batching family's check of runtime.batch_streams: 0 or 2..max, else
// Error(kInvalidArgument) "--batch-decode must be 0 (off) or 2..<max> <unit>, got <n>"
// (unit: what one batch is, "streams per graph"). Returns the value.
int check_batch_streams(const RuntimeOptions& runtime, int max, const std::string& unit);

// The encoder's kernels `runtime` gives, for reports: "OpenBLAS encoder", "flash
// attention" or "explicit-softmax attention".
std::string describe_encoder_kernels(const RuntimeOptions& runtime);

struct ModelSpec {
  std::filesystem::path path;
  RuntimeOptions runtime;
  policy::Settings policies;  // the streaming policies' settings (policy/registry.h)
  // Each family's own settings by family name (a copyable type T with
  // `static constexpr const char* kFamily`), reached through options<T>().
  std::map<std::string, std::any> families;

  // The family's settings, created with T's defaults on first use.
  template <class T>
  T& options() {
    std::any& slot = families[T::kFamily];
    if (!slot.has_value()) slot = T{};
    return std::any_cast<T&>(slot);
  }
  // The family's settings; T's defaults when the spec has none.
  template <class T>
  T options() const {
    const auto it = families.find(T::kFamily);
    return it == families.end() || !it->second.has_value() ? T{} : std::any_cast<const T&>(it->second);
  }
  // Drops every other family's settings (a spec for a model whose family is known).
  void keep_only_family(const std::string& family) {
    std::erase_if(families, [&](const auto& entry) { return entry.first != family; });
  }
};

}  // namespace earshot::engine

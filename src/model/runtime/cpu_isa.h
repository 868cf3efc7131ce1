// The vector instruction sets earshot's own CPU kernels are compiled for (each
// kernel is built once per path with GCC's target attribute and picked at run
// time), which of them this CPU runs, and a process-wide cap on them: tests run
// every path the CPU has by capping one after another (a path only one kind of
// machine would pick is still checked wherever it can run), and a benchmark can
// compare them. Kernels ask kernel_path() each call, so a cap takes effect at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace earshot::runtime {

// In order of preference; a later path needs what an earlier one of its family needs.
enum class CpuPath {
  kScalar,      // plain C++ (any x86-64)
  kAvx2,        // AVX2 + FMA + F16C (Haswell, Zen 1-3)
  kAvx2Vnni,    // the AVX2 kernels with 256-bit int8 dot products (AVX-VNNI, or AVX512-VNNI + VL)
  kAvx512,      // AVX-512 F + BW + VL + DQ (Skylake-X, Zen 4)
  kAvx512Vnni,  // the AVX-512 kernels with AVX512-VNNI int8 dot products (Ice Lake, Sapphire Rapids, Zen 4, Zen 5)
};

// "scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni".
std::string_view to_string(CpuPath path);
// Throws earshot::Error(kInvalidArgument) naming `label` for another name.
CpuPath parse_cpu_path(std::string_view text, std::string_view label);

// Whether this CPU runs the path's instructions.
bool cpu_has(CpuPath path);
// Whether the CPU has AVX-VNNI (the VEX-encoded 256-bit int8 dot products; kAvx2Vnni
// uses AVX512-VNNI's EVEX form of the same instructions where it has not).
bool cpu_has_avx_vnni();
// Every path this CPU runs, scalar first.
std::vector<CpuPath> cpu_paths();

// The best path this CPU runs within the cap (the best it has unless capped).
CpuPath kernel_path();
// Caps the kernels at `path` (the best this CPU has when it has not got it) for
// the whole process; cap_kernels(CpuPath::kAvx512Vnni) lifts the cap. Returns the
// previous cap. For tests and benchmarks: call it while no kernel runs.
CpuPath cap_kernels(CpuPath path);

// While it lives, the kernels are capped at `path`; restores the previous cap.
class ScopedKernelCap {
 public:
  explicit ScopedKernelCap(CpuPath path) : previous_(cap_kernels(path)) {}
  ~ScopedKernelCap() { cap_kernels(previous_); }
  ScopedKernelCap(const ScopedKernelCap&) = delete;
  ScopedKernelCap& operator=(const ScopedKernelCap&) = delete;

 private:
  CpuPath previous_;
};

// "AMD EPYC 9B45: avx512-vnni (avx2, avx2-vnni, avx512 also)": the CPU's model
// name and the kernel paths it runs, for `earshot version` and benchmark headers.
std::string describe_cpu();
// The CPU's model name ("AMD EPYC 9B45"), from /proc/cpuinfo; "" when unknown.
std::string cpu_model_name();

}  // namespace earshot::runtime

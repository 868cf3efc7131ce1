#include "model/runtime/cpu_isa.h"

#include <cpuid.h>

#include <array>
#include <atomic>
#include <fstream>
#include <string>

#include "common/error.h"

namespace earshot::runtime {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni"};

struct Features {
  bool avx2 = false, avx512 = false, avx512_vnni = false, avx_vnni = false;
};

// From CPUID and what the OS saves (XGETBV), not the compiler's builtins: clang
// and GCC disagree on the names they take.
Features read_features() {
  Features f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6) == 0x6, os_avx512 = (xcr0_lo & 0xe6) == 0xe6;
  if (!os_avx || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = (b & (1u << 5)) && fma && f16c;
  const bool avx512f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  f.avx512 = f.avx2 && os_avx512 && avx512f && dq && bw && vl;
  f.avx512_vnni = f.avx512 && (c & (1u << 11));
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  f.avx_vnni = f.avx2 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 4));
  return f;
}

const Features& features() {
  static const Features f = read_features();
  return f;
}

std::atomic<int> g_cap{static_cast<int>(CpuPath::kAvx512Vnni)};

}  // namespace

std::string_view to_string(CpuPath path) { return kNames[static_cast<size_t>(path)]; }

CpuPath parse_cpu_path(std::string_view text, std::string_view label) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (text == kNames[i]) return static_cast<CpuPath>(i);
  throw Error(ErrorCode::kInvalidArgument, std::string(label) + " must be scalar, avx2, avx2-vnni, avx512 or " +
                                               "avx512-vnni, not '" + std::string(text) + "'");
}

bool cpu_has(CpuPath path) {
  const Features& f = features();
  switch (path) {
    case CpuPath::kScalar: return true;
    case CpuPath::kAvx2: return f.avx2;
    case CpuPath::kAvx2Vnni: return f.avx2 && (f.avx_vnni || f.avx512_vnni);
    case CpuPath::kAvx512: return f.avx512;
    case CpuPath::kAvx512Vnni: return f.avx512_vnni;
  }
  return false;
}

bool cpu_has_avx_vnni() { return features().avx_vnni; }

std::vector<CpuPath> cpu_paths() {
  std::vector<CpuPath> out;
  for (size_t i = 0; i < kNames.size(); ++i)
    if (cpu_has(static_cast<CpuPath>(i))) out.push_back(static_cast<CpuPath>(i));
  return out;
}

CpuPath kernel_path() {
  for (int p = g_cap.load(std::memory_order_relaxed); p > 0; --p)
    if (cpu_has(static_cast<CpuPath>(p))) return static_cast<CpuPath>(p);
  return CpuPath::kScalar;
}

CpuPath cap_kernels(CpuPath path) {
  return static_cast<CpuPath>(g_cap.exchange(static_cast<int>(path), std::memory_order_relaxed));
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string describe_cpu() {
  std::string name = cpu_model_name();
  std::string out = (name.empty() ? std::string("CPU") : name) + ": " + std::string(to_string(kernel_path()));
  std::string others;
  for (CpuPath p : cpu_paths())
    if (p != CpuPath::kScalar && p != kernel_path()) others += (others.empty() ? "" : ", ") + std::string(to_string(p));
  if (!others.empty()) out += " (" + others + " also)";
  return out;
}

}  // namespace earshot::runtime

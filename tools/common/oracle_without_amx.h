// The parity oracles (libwhisper, libparakeet) put every CPU weight in ggml's AMX
// buffer when ggml is built with its AMX kernels and the CPU has AMX; there f16
// products multiply f32 activations, where ggml's other f16 kernels (and so
// earshot's graphs) round them to f16, and the two stop being comparable op for
// op. ggml offers that buffer only after the kernel grants the process AMX tile
// data (arch_prctl(ARCH_REQ_XCOMP_PERM)); this denies that one request with a
// seccomp filter, so in an oracle process both sides run the same non-AMX
// kernels. Call it first thing in main(), before any ggml backend exists.
// EARSHOT_ORACLE_AMX=1 leaves AMX on (to see the difference).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#if defined(__linux__) && defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

namespace earshot::tools {

// True when the request is now denied (or AMX cannot be granted here anyway).
inline bool deny_amx_to_this_process() {
#if defined(__linux__) && defined(__x86_64__)
  if (const char* keep = std::getenv("EARSHOT_ORACLE_AMX"); keep && std::strcmp(keep, "1") == 0) return false;
  constexpr unsigned kArchReqXcompPerm = 0x1023;
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_arch_prctl, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // the low word (little-endian)
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArchReqXcompPerm, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#else
  return true;
#endif
}

}  // namespace earshot::tools

#!/usr/bin/env bash
# Builds earshot (bootstrapping third-party code first when needed).
#   scripts/build.sh [release|sanitize|tsan|fuzz] [extra cmake args...]
# release -> build/release (EARSHOT_FAST_TESTS=OFF in the environment: of the GoogleTest
# executables only the slow ones); sanitize (ASan + UBSan at -O1 with line tables, without
# the slow tests and micro-benchmarks it never runs) -> build/sanitize; tsan
# (ThreadSanitizer, the same way; scripts/test.sh runs its threaded tests) -> build/tsan;
# fuzz (clang: libFuzzer targets of fuzz/ with ASan + UBSan, no tests) -> build/fuzz,
# built by default only up to the fuzzers (scripts/fuzz.sh runs them).
# EARSHOT_CUDA=ON in the environment: ggml with CUDA, build/<flavor>-cuda.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/common.sh"
flavor="${1:-release}"; shift || true
"$ROOT/scripts/bootstrap.sh"
case "$flavor" in
  # EARSHOT_FAST_TESTS=OFF (the test command's Release): only the slow tests' executables.
  release) args=(-DCMAKE_BUILD_TYPE=Release "-DEARSHOT_FAST_TESTS=${EARSHOT_FAST_TESTS:-ON}") ;;
  sanitize) args=(-DCMAKE_BUILD_TYPE=Sanitize "-DCMAKE_C_FLAGS_SANITIZE=-O1 -g1" "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -g1"
                  -DEARSHOT_SANITIZE=ON -DEARSHOT_SLOW_TESTS=OFF -DEARSHOT_MICRO_BENCHMARKS=OFF) ;;
  tsan) args=(-DCMAKE_BUILD_TYPE=Tsan "-DCMAKE_C_FLAGS_TSAN=-O1 -g1" "-DCMAKE_CXX_FLAGS_TSAN=-O1 -g1"
              -DEARSHOT_TSAN=ON -DEARSHOT_SLOW_TESTS=OFF -DEARSHOT_MICRO_BENCHMARKS=OFF) ;;
  # Debian's clang (libFuzzer lives in libclang-rt-14-dev); the third-party code stays GCC's.
  fuzz) args=(-DCMAKE_BUILD_TYPE=Fuzz "-DCMAKE_C_FLAGS_FUZZ=-O1 -g1" "-DCMAKE_CXX_FLAGS_FUZZ=-O1 -g1"
              -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEARSHOT_FUZZ=ON -DEARSHOT_BUILD_TESTS=OFF)
        [ -n "${EARSHOT_TARGETS:-}" ] || EARSHOT_TARGETS=earshot_fuzzers ;;
  *) echo "usage: scripts/build.sh [release|sanitize|tsan|fuzz] [cmake args...]" >&2; exit 2 ;;
esac
dir="$ROOT/build/$flavor"
# EARSHOT_CUDA=ON: ggml with its CUDA backend (bootstrapped into third_party/install-cuda).
if earshot_cuda_enabled; then args+=(-DEARSHOT_CUDA=ON); dir="$dir-cuda"; fi
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout in ccache's hashes: another clone (CI) reuses the objects.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
cmake -S "$ROOT" -B "$dir" -G Ninja "${args[@]}" "${launcher[@]}" "$@" >/dev/null
# EARSHOT_TARGETS limits the build (scripts/earshot builds only the binary).
targets=(); [ -n "${EARSHOT_TARGETS:-}" ] && targets=(--target ${EARSHOT_TARGETS})
cmake --build "$dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"

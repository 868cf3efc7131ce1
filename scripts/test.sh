#!/usr/bin/env bash
# The test command (README, CI): builds Release and the ASan+UBSan flavour, then
# runs every CTest test in both. Slow end-to-end tests run in Release only. Then
# every libFuzzer target (scripts/fuzz.sh, clang's fuzz flavour) for
# EARSHOT_FUZZ_SECONDS each (default 15; 0 skips) on its seeds: any finding fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
"$ROOT/scripts/build.sh" release
"$ROOT/scripts/build.sh" sanitize
status=0
echo "== Release tests"
ctest --test-dir "$ROOT/build/release" --output-on-failure -j "$JOBS" || status=1
echo "== ASan + UBSan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$ROOT/build/sanitize" --output-on-failure -j "$JOBS" -LE slow || status=1
fuzz_seconds="${EARSHOT_FUZZ_SECONDS:-15}"
if [ "$fuzz_seconds" != 0 ]; then
  echo "== libFuzzer targets, ${fuzz_seconds} s each"
  "$ROOT/scripts/fuzz.sh" all "$fuzz_seconds" || status=1
fi
exit $status

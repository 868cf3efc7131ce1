#!/usr/bin/env bash
# The test command (README, CI): builds Release and the ASan+UBSan flavour, then
# runs every CTest test in both. Slow end-to-end tests run in Release only.
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
exit $status

#!/usr/bin/env bash
# The test command (README, CI): builds Release and the ASan+UBSan flavour. Every
# test not labelled slow runs once, under ASan + UBSan; the slow end-to-end tests
# (real peers, servers paced in real time: they need the optimised binary) run in
# Release, which builds only their executables (EARSHOT_FAST_TESTS=OFF) besides
# earshot, its tools and the micro-benchmarks. (Running the fast tests in both
# flavours cost a third of the script's time: 2026-12-05.)
# Then the threaded tests under ThreadSanitizer (build/tsan, only their targets):
# the server (HTTP, WebSocket, drain, faults; the scheduler and worker pool behind
# it), the sessions and their scheduler, and one model shared by sessions on threads
# and the streaming transducer's batcher (about 100 s on 2 busy cores; suppressions in
# scripts/tsan.supp, ggml's kernels only).
# Last, every libFuzzer target (scripts/fuzz.sh, clang's fuzz flavour) for
# EARSHOT_FUZZ_SECONDS each (default 15; 0 skips) on its seeds: any finding fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${JOBS:-$(nproc)}"
# Each phase's wall time, so a slow CI run says where its minutes went.
phase_start=$SECONDS
phase_summary=""
phase() {
  phase_summary+="$(printf '%6d s  %s' $((SECONDS - phase_start)) "$*")"$'\n'
  echo "== [$((SECONDS - phase_start)) s] $*"
  phase_start=$SECONDS
}
EARSHOT_FAST_TESTS=OFF "$ROOT/scripts/build.sh" release
phase "built Release (bootstrap included)"
"$ROOT/scripts/build.sh" sanitize
phase "built ASan+UBSan"
TSAN_TARGETS=(tests/server/earshot_server_test tests/session/earshot_session_test tests/model/earshot_model_session_test
  tests/model/earshot_model_fastconformer_test tests/model/runtime/earshot_model_runtime_test
  tests/model/voxtral/earshot_voxtral_model_test)
# The model's other tests are single-threaded and slow under TSan (over 8 min on 2 cores): only the shared-model one.
declare -A TSAN_FILTER=([tests/model/earshot_model_session_test]=SessionTest.TwoSessionsOnOneModelInTwoThreadsEqualEachAlone:DecodeBatcher.*
  [tests/model/earshot_model_fastconformer_test]=FastConformerBatchErrors.*
  [tests/model/runtime/earshot_model_runtime_test]=Rendezvous.*
  [tests/model/voxtral/earshot_voxtral_model_test]=VoxtralSteps.StreamsSharingABatcherDecodeAsAlone)
EARSHOT_TARGETS="$(printf '%s ' "${TSAN_TARGETS[@]##*/}")" "$ROOT/scripts/build.sh" tsan
phase "built TSan"
status=0
# What failed, phase by phase: printed last, so the tail of a long log names it.
failures=""
failure_output=""
failed() { failures+="$*"$'\n'; status=1; }
# A failed ctest run: each failed test is run once more, alone, to tell a failure
# from a flaky one in the record; either way the script fails.
ctest_failures() {  # $1: flavour; ctest keeps the failed tests' numbers and names
  local log="$ROOT/build/$1/Testing/Temporary/LastTestsFailed.log"
  if [ -s "$log" ]; then
    local names=()
    while IFS= read -r line; do names+=("${line#*:}"); done <"$log"
    for name in "${names[@]}"; do
      # Its output from the failing run, kept before the rerun rewrites ctest's log:
      # printed again last, where the tail of a long CI log still shows it.
      failure_output+="== $1: $name, the end of its output when it failed"$'\n'
      failure_output+="$(awk -v name="$name" '
        $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); current = $0 }
        current == name && /^<end of output>$/ { inside = 0 }
        inside { print }
        current == name && /^Output:$/ { inside = 1; getline }
      ' "$ROOT/build/$1/Testing/Temporary/LastTest.log" 2>/dev/null | tail -n 30 || true)"$'\n'
      if ctest --test-dir "$ROOT/build/$1" --output-on-failure -R "^${name//./\\.}\$" >/dev/null 2>&1; then
        failed "$1: $name (passed when run again alone: flaky)"
      else
        failed "$1: $name (failed again when run alone)"
      fi
    done
  else
    failed "$1: ctest failed (no test recorded as failed: see its output above)"
  fi
}
echo "== Release tests (the slow ones)"
ctest --test-dir "$ROOT/build/release" --output-on-failure -j "$JOBS" -L slow || ctest_failures release
phase "Release tests (slow)"
echo "== ASan + UBSan tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$ROOT/build/sanitize" --output-on-failure -j "$JOBS" -LE slow || ctest_failures sanitize
phase "ASan+UBSan tests"
echo "== ThreadSanitizer tests"
for t in "${TSAN_TARGETS[@]}"; do
  # Gtest executables run directly: ctest in build/tsan would list the targets not built there.
  TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
    EARSHOT_SHARED_DIR="$ROOT/../shared" "$ROOT/build/tsan/$t" --gtest_brief=1 "--gtest_filter=${TSAN_FILTER[$t]:-*}" \
    || failed "tsan: ${t##*/} (its output above names the test and the race)"
done
phase "TSan tests"
fuzz_seconds="${EARSHOT_FUZZ_SECONDS:-15}"
if [ "$fuzz_seconds" != 0 ]; then
  echo "== libFuzzer targets, ${fuzz_seconds} s each"
  "$ROOT/scripts/fuzz.sh" all "$fuzz_seconds" || failed "fuzz: a target found something (the table above)"
  phase "fuzz build and runs"
fi
printf '== where the time went (%d s in all)\n%s' "$SECONDS" "$phase_summary"
for flavour in release sanitize; do
  cost="$ROOT/build/$flavour/Testing/Temporary/CTestCostData.txt"
  [ -f "$cost" ] || continue
  echo "== the slowest $flavour tests (s, ctest's record)"
  # sed, not head: head's early exit would kill sort with SIGPIPE, and under pipefail
  # and set -e the script would exit 141 after every test had passed.
  awk 'NF == 3 { printf "%8.1f  %s\n", $3, $1 }' "$cost" | sort -rn | sed -n '1,8p'
done
if [ -n "$failures" ]; then
  printf '%s' "$failure_output"
  printf '== FAILED\n%s' "$failures"
else
  echo "== every test passed"
fi
exit $status

#!/usr/bin/env bash
# Builds the fuzz flavour (build/fuzz) and runs libFuzzer targets on their seeds.
#   scripts/fuzz.sh [TARGET|all] [SECONDS]     (default: all, 60 s each)
# Targets: fuzz/targets/*.cpp. Each runs SECONDS on a copy of fuzz/corpus/TARGET
# (the committed seeds stay small; EARSHOT_FUZZ_CORPUS=DIR keeps the grown corpus
# in DIR/TARGET instead, for long runs that continue), with fuzz/dict/TARGET.dict
# when present. Prints per target: executions, exec/s, coverage and features
# (libFuzzer's cov/ft), and findings (crash, leak, timeout, out of memory), whose
# inputs are kept in build/fuzz/findings/TARGET/ (EARSHOT_FUZZ_OUT=DIR: in DIR), with
# the run's log beside them. Exits 1 on any finding.
# EARSHOT_FUZZ_NO_BUILD=1 skips the build; FUZZ_ARGS adds libFuzzer flags.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
which="${1:-all}"
seconds="${2:-60}"
BUILD="$ROOT/build/fuzz"

# Longest input per target: model files are capped so one execution stays
# fast (the Whisper seeds are its header, mel filters and vocabulary, ~65 KB).
declare -A MAX_LEN=([whisper_model]=70000 [parakeet_model]=32768 [vad_model]=8192 [gguf]=4096 [wav]=8192 [stream_decoder]=16384
                    [wlk_request]=1024 [deepgram]=1024 [multipart]=4096 [tokenizer]=1024)
all_targets=()
for f in "$ROOT"/fuzz/targets/*.cpp; do all_targets+=("$(basename "$f" .cpp)"); done
if [ "$which" = all ]; then
  targets=("${all_targets[@]}")
elif [ -f "$ROOT/fuzz/targets/$which.cpp" ]; then
  targets=("$which")
else
  echo "scripts/fuzz.sh: no target '$which' (targets: ${all_targets[*]})" >&2
  exit 2
fi

if [ "${EARSHOT_FUZZ_NO_BUILD:-0}" != 1 ]; then
  names=()
  for t in "${targets[@]}"; do names+=("earshot_fuzz_$t"); done
  EARSHOT_TARGETS="${names[*]}" "$ROOT/scripts/build.sh" fuzz
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
printf '%-15s %12s %9s %7s %7s %6s %5s %8s %4s  %s\n' target executions exec/s cov ft crash leak timeout oom log
for t in "${targets[@]}"; do
  if [ -n "${EARSHOT_FUZZ_CORPUS:-}" ]; then
    corpus="$EARSHOT_FUZZ_CORPUS/$t"
    [ -d "$corpus" ] || { mkdir -p "$corpus"; cp "$ROOT/fuzz/corpus/$t/"* "$corpus/"; }
  else
    corpus="$tmp/corpus-$t"
    mkdir -p "$corpus"
    cp "$ROOT/fuzz/corpus/$t/"* "$corpus/"
  fi
  out="${EARSHOT_FUZZ_OUT:-$BUILD/findings}"
  findings="$out/$t"
  mkdir -p "$findings"
  log="$out/$t.log"
  touch "$tmp/start-$t"  # findings newer than this are this run's
  args=(-max_total_time="$seconds" -max_len="${MAX_LEN[$t]:-4096}" -timeout=25 -rss_limit_mb=2560
        -print_final_stats=1 -print_funcs=0 -artifact_prefix="$findings/")
  [ -f "$ROOT/fuzz/dict/$t.dict" ] && args+=(-dict="$ROOT/fuzz/dict/$t.dict")
  # shellcheck disable=SC2086
  "$BUILD/fuzz/earshot_fuzz_$t" "${args[@]}" ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1 || true
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  # The last status line (#N DONE / pulse / NEW ... cov: C ft: F ...) has the final coverage.
  cov="$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')"
  ft="$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.* ft: \([0-9]*\).*/\1/p')"
  count() { find "$findings" -maxdepth 1 -name "$1-*" -newer "$tmp/start-$t" | wc -l; }
  crash=$(( $(count crash) + $(count deadly-signal) )); leak=$(count leak); timeout=$(count timeout); oom=$(count oom)
  # A sanitizer report or a broken invariant without an artifact (e.g. during seed loading) is a crash too.
  if [ $crash -eq 0 ] && grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz invariant broken' "$log"; then
    crash=1
  fi
  printf '%-15s %12s %9s %7s %7s %6s %5s %8s %4s  %s\n' "$t" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "$crash" "$leak" "$timeout" "$oom" "${log#"$ROOT"/}"
  [ $((crash + leak + timeout + oom)) -eq 0 ] && [ -n "$(stat number_of_executed_units)" ] || status=1
done
exit $status

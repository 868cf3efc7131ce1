#!/usr/bin/env bash
# earshot's engine on a GPU, checked against libwhisper on the same GPU with
# generated random-weight models: parity (earshot-parity --device) on the shapes
# CTest checks on the CPU, then speed (earshot-bench-model --device) at tiny.en,
# base.en, large-v3-turbo and large-v3 dimensions. Needs a CUDA build
# (EARSHOT_CUDA=ON scripts/build.sh release) and a machine with the GPU.
#   scripts/gpu-check.sh [LOG_DIR]
# Environment: DEVICE (default CUDA0), BIN (folder holding earshot-parity,
# earshot-bench-model and earshot-make-model; default: build/release-cuda's),
# SHARED (default ../shared), MODELS (where models are generated; default a
# temporary folder), REPS (bench repetitions, default 10).
# Exit status: the number of failed checks.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_DIR="${1:-$ROOT/build/gpu-check}"
DEVICE="${DEVICE:-CUDA0}"
SHARED="${SHARED:-$ROOT/../shared}"
REPS="${REPS:-10}"
MODELS="${MODELS:-$(mktemp -d)}"
if [ -n "${BIN:-}" ]; then
  parity="$BIN/earshot-parity" bench="$BIN/earshot-bench-model" make_model="$BIN/earshot-make-model"
else
  b="$ROOT/build/release-cuda/tools"
  parity="$b/parity/earshot-parity" bench="$b/bench_model/earshot-bench-model" make_model="$b/make_model/earshot-make-model"
fi
for tool in "$parity" "$bench" "$make_model"; do
  [ -x "$tool" ] || { echo "gpu-check: $tool not found (EARSHOT_CUDA=ON scripts/build.sh release, or BIN=...)" >&2; exit 2; }
done
mkdir -p "$LOG_DIR" "$MODELS"
failures=0 summary=()

# check NAME COMMAND...: runs it with its output in LOG_DIR/NAME.log and on stdout.
check() {
  local name="$1"; shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$LOG_DIR/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || failures=$((failures + 1))
  summary+=("$(printf '%-24s rc=%s %4ss  %s' "$name" "$rc" $((SECONDS - start)) "$(tail -1 "$LOG_DIR/$name.log")")")
}
model() {  # model NAME make-model args...: generates MODELS/NAME.bin once
  local name="$1"; shift
  [ -f "$MODELS/$name.bin" ] || "$make_model" --out "$MODELS/$name.bin" "$@" >"$LOG_DIR/make-$name.log" 2>&1 ||
    { echo "gpu-check: generating $name failed:"; cat "$LOG_DIR/make-$name.log"; exit 2; }
}

tiny_en=(--template "$SHARED/models/for-tests-ggml-tiny.en.bin")
tiny=(--template "$SHARED/models/for-tests-ggml-tiny.bin")
v3_vocab=(--n-vocab 51866 --n-mels 128 --vocab-tiktoken "$SHARED/models/whisper-multilingual.tiktoken")
audio="$SHARED/data/jfk.wav"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv

# Parity: the shapes of tests/model/CMakeLists.txt, both engines on DEVICE.
model en_f16 "${tiny_en[@]}" --seed 11 --n-state 128 --n-head 2 --n-layer 2 --n-audio-ctx 750
model multilingual_q8_0 "${tiny[@]}" --seed 12 --type q8_0 --n-state 256 --n-head 4 --n-layer 3 --n-audio-ctx 750
model v3_mel128_f16 "${tiny[@]}" --seed 13 "${v3_vocab[@]}" --n-state 192 --n-head 3 --n-layer 2 --n-audio-ctx 750
model en_q5_0 "${tiny_en[@]}" --seed 14 --type q5_0 --n-state 64 --n-head 2 --n-audio-layer 2 --n-text-layer 4 \
  --n-audio-ctx 750
model tiny_en_dims "${tiny_en[@]}" --seed 15
for m in en_f16 multilingual_q8_0 v3_mel128_f16 en_q5_0 tiny_en_dims; do
  check "parity-$m" "$parity" --model "$MODELS/$m.bin" --audio "$audio" --tokens 8 --device "$DEVICE"
done

# Speed at real dimensions (random weights run at real speed).
model tiny.en "${tiny_en[@]}" --seed 1
model base.en --template "$SHARED/models/for-tests-ggml-base.en.bin" --seed 2
model large-v3-turbo --template "$SHARED/models/for-tests-ggml-large.bin" --seed 3 "${v3_vocab[@]}" \
  --n-audio-state 1280 --n-audio-head 20 --n-audio-layer 32 --n-text-state 1280 --n-text-head 20 --n-text-layer 4
model large-v3 --template "$SHARED/models/for-tests-ggml-large.bin" --seed 4 "${v3_vocab[@]}"
for m in tiny.en base.en large-v3-turbo large-v3; do
  check "bench-$m" "$bench" --model "$MODELS/$m.bin" --device "$DEVICE" --reps "$REPS" --control on
done

echo "== summary ($DEVICE; logs in $LOG_DIR)"
printf '%s\n' "${summary[@]}"
exit "$failures"

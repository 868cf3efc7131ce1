#!/usr/bin/env bash
# earshot on a GPU, with generated random-weight models: the engine against
# libwhisper on the same GPU (earshot-parity --device on the shapes CTest checks
# on the CPU; earshot-bench-model --device at tiny.en, base.en, large-v3-turbo and
# large-v3 dimensions), then the product on it: `earshot transcribe` with each
# policy and beam search, and `earshot serve --pcm-input` with a streaming client
# (scripts/ws-pcm-client.py); with PARTS="transducer", batched live streams of a
# cache-aware streaming transducer; with PARTS="translation", live translation
# sessions on one LLM (earshot_bench_tcap). Needs a CUDA build (EARSHOT_CUDA=ON
# scripts/build.sh release; EARSHOT_GGML_NATIVE=OFF when it is built on another
# machine than the GPU's) and a machine with the GPU.
#   scripts/gpu-check.sh [LOG_DIR]
# Environment: DEVICE (default CUDA0), BIN (folder holding earshot, earshot-parity,
# earshot-bench-model and earshot-make-model; default: build/release-cuda's),
# SHARED (default ../shared), MODELS (where models are generated; default a
# temporary folder), REPS (bench repetitions, default 10), PARTS (default
# "engine product"), TRANSDUCER_SESSIONS (default 1,16), TRANSLATION_SECONDS
# (each translation stream's length, default 30), TRANSLATION_MAX_SESSIONS
# (default 16), TRANSLATION_BATCH (sessions of the batched comparison, default 8).
# Exit status: the number of failed checks.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG_DIR="${1:-$ROOT/build/gpu-check}"
DEVICE="${DEVICE:-CUDA0}"
SHARED="${SHARED:-$ROOT/../shared}"
REPS="${REPS:-10}"
PARTS="${PARTS:-engine product}"
MODELS="${MODELS:-$(mktemp -d)}"
if [ -n "${BIN:-}" ]; then
  parity="$BIN/earshot-parity" bench="$BIN/earshot-bench-model" make_model="$BIN/earshot-make-model"
  earshot="$BIN/earshot"
else
  b="$ROOT/build/release-cuda/tools"
  parity="$b/parity/earshot-parity" bench="$b/bench_model/earshot-bench-model" make_model="$b/make_model/earshot-make-model"
  earshot="$ROOT/build/release-cuda/src/cli/earshot"
fi
# The tools each part runs (the transducer part also runs earshot-make-parakeet,
# the translation part earshot_bench_tcap: checked there).
tools=("$earshot")
[[ " $PARTS " == *" engine "* ]] && tools+=("$parity" "$bench" "$make_model")
[[ " $PARTS " == *" product "* ]] && tools+=("$make_model")
for tool in "${tools[@]}"; do
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
tiny_en_dims_model=(tiny.en "${tiny_en[@]}" --seed 1)  # engine speed and the product checks

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv

if [[ " $PARTS " == *" engine "* ]]; then
# Parity: the shapes of tests/model/CMakeLists.txt, both engines on DEVICE.
model en_f16 "${tiny_en[@]}" --seed 11 --n-state 128 --n-head 2 --n-layer 2 --n-audio-ctx 750
model en_f32 "${tiny_en[@]}" --seed 16 --type f32 --n-state 128 --n-head 2 --n-layer 2 --n-audio-ctx 750
model multilingual_q8_0 "${tiny[@]}" --seed 12 --type q8_0 --n-state 256 --n-head 4 --n-layer 3 --n-audio-ctx 750
model v3_mel128_f16 "${tiny[@]}" --seed 13 "${v3_vocab[@]}" --n-state 192 --n-head 3 --n-layer 2 --n-audio-ctx 750
model en_q5_0 "${tiny_en[@]}" --seed 14 --type q5_0 --n-state 64 --n-head 2 --n-audio-layer 2 --n-text-layer 4 \
  --n-audio-ctx 750
model tiny_en_dims "${tiny_en[@]}" --seed 15
for m in en_f16 en_f32 multilingual_q8_0 v3_mel128_f16 en_q5_0 tiny_en_dims; do
  check "parity-$m" "$parity" --model "$MODELS/$m.bin" --audio "$audio" --tokens 8 --device "$DEVICE"
done

# Speed at real dimensions (random weights run at real speed).
model "${tiny_en_dims_model[@]}"
model base.en --template "$SHARED/models/for-tests-ggml-base.en.bin" --seed 2
model large-v3-turbo --template "$SHARED/models/for-tests-ggml-large.bin" --seed 3 "${v3_vocab[@]}" \
  --n-audio-state 1280 --n-audio-head 20 --n-audio-layer 32 --n-text-state 1280 --n-text-head 20 --n-text-layer 4
model large-v3 --template "$SHARED/models/for-tests-ggml-large.bin" --seed 4 "${v3_vocab[@]}"
for m in tiny.en base.en large-v3-turbo large-v3; do
  check "bench-$m" "$bench" --model "$MODELS/$m.bin" --device "$DEVICE" --reps "$REPS" --control on
done
fi

# The product on the GPU: each policy, beam search, and the server with a client.
transcribe() {  # transcribe NAME options...: jfk.wav with tiny.en dimensions, JSON transcript in LOG_DIR
  local name="$1"; shift
  check "transcribe-$name" "$earshot" transcribe "$audio" --model "$MODELS/tiny.en.bin" --format json \
    --output "$LOG_DIR/transcript-$name.json" "$@"
}
if [[ " $PARTS " == *" product "* ]]; then
  model "${tiny_en_dims_model[@]}"
  "$earshot" version
  transcribe alignatt --device "$DEVICE"
  transcribe alignatt-beams4 --device "$DEVICE" --beams 4
  transcribe localagreement --device "$DEVICE" --policy localagreement
  transcribe cpu-8-threads --device cpu --threads 8
  # One model on the GPU shared by four sessions whose model work runs at once.
  port=$((20000 + RANDOM % 20000))
  "$earshot" serve --model "$MODELS/tiny.en.bin" --device "$DEVICE" --pcm-input --port "$port" --workers 4 \
    --vad-model "$SHARED/models/silero-v6.2.0-ggml.bin" >"$LOG_DIR/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 1 120); do grep -q "listening on" "$LOG_DIR/serve.log" && break; sleep 0.5; done
  check serve-pcm-stream python3 "$ROOT/scripts/ws-pcm-client.py" "$audio" --url "ws://127.0.0.1:$port/asr"
  four_streams() {
    local pids=() rc=0
    for i in 1 2 3 4; do
      python3 "$ROOT/scripts/ws-pcm-client.py" "$audio" --url "ws://127.0.0.1:$port/asr" >"$LOG_DIR/stream-$i.log" 2>&1 &
      pids+=($!)
    done
    for i in 0 1 2 3; do wait "${pids[$i]}" || rc=1; done
    grep -h "ready_to_stop .* s after" "$LOG_DIR"/stream-*.log
    return $rc
  }
  check serve-4-streams four_streams
  kill "$server"
  wait "$server" 2>/dev/null
  cat "$LOG_DIR/serve.log"
fi

# Live cache-aware transducer streams on the GPU, batched (PARTS="transducer"):
# a random streaming model at the real 0.6B dimensions, the reference workload
# (src/bench/transducer_reference.h), 1 and 16 sessions at 160 and 560 ms with
# their chunks batched up to 16 a step.
if [[ " $PARTS " == *" transducer "* ]]; then
  make_parakeet="${BIN:-$ROOT/build/release-cuda/tools/make_parakeet}/earshot-make-parakeet"
  [ -f "$MODELS/s35.gguf" ] || "$make_parakeet" --dims real --streaming 1 --prompt 1 --type f16 --seed 7 \
    --gguf "$MODELS/s35.gguf" >"$LOG_DIR/make-s35.log" 2>&1 ||
    { echo "gpu-check: generating s35.gguf failed:"; cat "$LOG_DIR/make-s35.log"; exit 2; }
  for lookahead in 160 560; do
    check "transducer-capacity-$lookahead" "$earshot" bench --dataset "$SHARED/data/librivox" \
      --model "$MODELS/s35.gguf" --device "$DEVICE" --policy native --lookahead-ms "$lookahead" \
      --workload reference --vad-model "$SHARED/models/silero-v6.2.0-ggml.bin" --capacity \
      --sessions "${TRANSDUCER_SESSIONS:-1,16}" --workers 16 --batch-decode 16 --profile
  done
fi

# Live translation sessions on the GPU (PARTS="translation"): Hy-MT2-1.8B's
# dimensions, random Q4_0 weights, the reference workload; N doubles until a run
# is not sustained, then N sessions with and without their steps batched.
if [[ " $PARTS " == *" translation "* ]]; then
  tcap="${BIN:-$ROOT/build/release-cuda/benchmarks}/earshot_bench_tcap"
  [ -x "$tcap" ] || { echo "gpu-check: $tcap not found (a CUDA build with -DEARSHOT_MICRO_BENCHMARKS=ON)" >&2; exit 2; }
  export EARSHOT_BENCH_LLM_DIR="$MODELS/llm"
  seconds="${TRANSLATION_SECONDS:-30}"
  check translation-capacity "$tcap" --type q4_0 --workload reference --workers 16 --threads 2 \
    --seconds "$seconds" --max-sessions "${TRANSLATION_MAX_SESSIONS:-16}"
  check translation-batched "$tcap" --type q4_0 --workload reference --threads 2 --seconds "$seconds" \
    --batch "${TRANSLATION_BATCH:-8}"
fi

echo "== summary ($DEVICE; logs in $LOG_DIR)"
printf '%s\n' "${summary[@]}"
exit "$failures"

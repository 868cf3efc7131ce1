#!/usr/bin/env bash
# Soak test: the real `earshot serve` on loopback under N concurrent WebSocket
# clients for T minutes (scripts/soak.py: webm/opus on /asr and s16le PCM on
# /v1/listen, looping over the shared recordings at real time, a third leaving
# mid-stream), RSS/fds/threads sampled into a CSV, every finished stream checked
# against the same audio alone, the RSS slope after warm-up reported.
#   scripts/soak.sh [--streams N] [--minutes T] [--model FILE] [--out DIR] [--interval S]
#                   [--fast-share F] [--sigterm-after S] [-- serve options]
# --fast-share: that share of the streams is sent as fast as the server reads it (backpressure);
# --sigterm-after: the server gets SIGTERM S seconds in, with streams running (their final
# results must hold every committed word).
# Without --model, a random-weight model (tiny dimensions, as the tests use) is made
# with earshot-make-model. Needs build/release (earshot, earshot-make-model).
# Exit status 1 when a stream differed from its lone run or a client failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
streams=4 minutes=20 model="" out="" interval=5 fast_share=0 sigterm_after=0
while [ $# -gt 0 ]; do
  case "$1" in
    --streams) streams="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    --fast-share) fast_share="$2"; shift 2 ;;
    --sigterm-after) sigterm_after="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: scripts/soak.sh [--streams N] [--minutes T] [--model FILE] [--out DIR] [--interval S] [--fast-share F] [--sigterm-after S] [-- serve options]" >&2; exit 2 ;;
  esac
done
BIN="${EARSHOT_BIN:-$ROOT/build/release/src/cli/earshot}"
SHARED="${EARSHOT_SHARED_DIR:-$ROOT/../shared}"
out="${out:-$(mktemp -d /tmp/earshot-soak.XXXXXX)}"
mkdir -p "$out"
if [ -z "$model" ]; then
  model="$out/model.bin"
  "${EARSHOT_MAKE_MODEL:-$ROOT/build/release/tools/make_model/earshot-make-model}" \
    --template "$SHARED/models/for-tests-ggml-tiny.en.bin" --out "$model" \
    --vocab-tiktoken "$SHARED/models/whisper-gpt2.tiktoken" --type f32 --seed 7 \
    --n-audio-state 64 --n-audio-head 2 --n-audio-layer 1 --n-text-state 64 --n-text-head 2 --n-text-layer 2 >/dev/null
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# Fixed 1 s model steps: a stream's words depend on its audio only, not on the load.
"$BIN" serve --model "$model" --no-pull --host 127.0.0.1 --port "$port" --language en \
  --vad-model "$SHARED/models/silero-v6.2.0-ggml.bin" --threads 1 --workers 2 \
  --vac-chunk-size 1 --max-step-seconds 1 --max-sessions "$((streams + 4))" "$@" > "$out/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -fs "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "earshot serve exited: see $out/serve.log" >&2; exit 1; }
  sleep 0.2
done
status=0
python3 "$ROOT/scripts/soak.py" --port "$port" --pid "$pid" --streams "$streams" --minutes "$minutes" \
  --interval "$interval" --fast-share "$fast_share" --sigterm-after "$sigterm_after" \
  --csv "$out/samples.csv" --data "$SHARED/data" || status=1
kill -TERM $pid 2>/dev/null || true  # soak.py --sigterm-after may have sent it already
wait $pid || { echo "earshot serve exited with $? after SIGTERM" >&2; status=1; }
trap - EXIT
echo "soak: samples in $out/samples.csv, server log in $out/serve.log"
exit $status

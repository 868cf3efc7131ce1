#!/usr/bin/env bash
# Runs the clients in examples/ against `earshot serve` on a generated random-weight
# model, so the documented examples never rot: examples/asr_client.py streams
# jfk.wav over /asr (encoded, as a file's bytes) to ready_to_stop and writes an SRT;
# examples/transcribe_curl.sh gets an SRT from /v1/audio/transcriptions and
# Deepgram's JSON from POST /v1/listen; examples/node's clients of the official OpenAI
# and Deepgram SDKs (npm ci from its lockfile first) transcribe the file and stream it live.
# The server diarizes with a generated Sortformer: Deepgram's diarize=true and OpenAI's
# verbose_json then name speakers, and everything above works as without it.
#   examples_test.sh EARSHOT_BIN MAKE_MODEL_BIN SHARED_DIR WORK_DIR MAKE_SORTFORMER_BIN
set -euo pipefail
bin="$1" make_model="$2" shared="$3" work="$4" make_sortformer="$5"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rm -rf "$work" && mkdir -p "$work"
"$make_model" --template "$shared/models/for-tests-ggml-tiny.en.bin" --out "$work/model.bin" \
  --vocab-tiktoken "$shared/models/whisper-gpt2.tiktoken" --type f32 --seed 7 \
  --n-audio-state 64 --n-audio-head 2 --n-audio-layer 1 --n-text-state 64 --n-text-head 2 --n-text-layer 2 >/dev/null
"$make_sortformer" --out "$work/sortformer.gguf" --seed 5 >/dev/null

"$bin" serve --host 127.0.0.1 --port 0 --no-pull --model "$work/model.bin" \
  --vad-model "$shared/models/silero-v6.2.0-ggml.bin" --threads 1 \
  --diarization-model "$work/sortformer.gguf" --diarization-chunk-ms 800 >"$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 600); do  # the listening line, or the server's exit (0.1 s steps, at most a minute)
  url="$(sed -nE 's/.*listening on (http:\/\/127\.0\.0\.1:[0-9]+).*/\1/p' "$work/serve.log" | head -1)"
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; echo "earshot serve exited before listening"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "earshot serve did not start"; exit 1; }

/usr/bin/python3 "$root/examples/asr_client.py" "$shared/data/jfk.wav" --url "ws://${url#http://}/asr" \
  --language en --srt "$work/asr.srt" >"$work/asr.out"
grep -q -- ' - ' "$work/asr.out" || { cat "$work/asr.out"; echo "asr_client printed no final line"; exit 1; }
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> ' "$work/asr.srt" || { cat "$work/asr.srt"; echo "no SRT cue"; exit 1; }

"$root/examples/transcribe_curl.sh" "$shared/data/jfk.wav" "$url" >"$work/curl.srt" 2>"$work/curl.json"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> ' "$work/curl.srt" || { cat "$work/curl.srt"; echo "no SRT cue"; exit 1; }
grep -q '"results"' "$work/curl.json" || { cat "$work/curl.json"; echo "no Deepgram results"; exit 1; }
if grep -q '"speaker"' "$work/curl.json"; then cat "$work/curl.json"; echo "speakers without diarize=true"; exit 1; fi
curl -sS --fail-with-body --data-binary "@$shared/data/jfk.wav" "$url/v1/listen?diarize=true" >"$work/diarized.json"
grep -q '"speaker":[0-9]' "$work/diarized.json" || { cat "$work/diarized.json"; echo "no speakers (diarize=true)"; exit 1; }
curl -sS --fail-with-body -F "file=@$shared/data/jfk.wav" -F response_format=verbose_json \
  "$url/v1/audio/transcriptions" >"$work/verbose.json"
grep -q '"speaker":[0-9]' "$work/verbose.json" || { cat "$work/verbose.json"; echo "no speakers (verbose_json)"; exit 1; }
curl -sS --fail-with-body -F "file=@$shared/data/jfk.wav" -F response_format=diarized_json \
  "$url/v1/audio/transcriptions" >"$work/diarized_openai.json"
grep -q '"type":"transcript.text.segment"' "$work/diarized_openai.json" && grep -q '"speaker":"[A-D]"' \
  "$work/diarized_openai.json" || { cat "$work/diarized_openai.json"; echo "no diarized_json speakers"; exit 1; }

"$root/tests/browser/npm_ci.sh" "$root/examples/node" >"$work/npm.log" 2>&1 || { cat "$work/npm.log"; exit 1; }
node "$root/examples/node/openai_transcribe.mjs" "$shared/data/jfk.wav" --url "$url" --format srt >"$work/sdk.srt"
grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> ' "$work/sdk.srt" || { cat "$work/sdk.srt"; echo "no SRT cue (openai SDK)"; exit 1; }
node "$root/examples/node/deepgram_live.mjs" "$shared/data/jfk.wav" --url "$url" --fast >"$work/deepgram.out"
grep -Eq '^[0-9]+\.[0-9]{2}s ' "$work/deepgram.out" || { cat "$work/deepgram.out"; echo "no final result (Deepgram SDK)"; exit 1; }
grep -q '^closed$' "$work/deepgram.out" || { cat "$work/deepgram.out"; echo "the live connection did not close"; exit 1; }

kill -TERM "$server"
wait "$server" || { cat "$work/serve.log"; echo "earshot serve did not exit 0 on SIGTERM"; exit 1; }
trap - EXIT
echo examples-ok

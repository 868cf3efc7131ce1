#!/usr/bin/env bash
# Pass-by-pass comparison of earshot's AlignAtt with ufal's SimulStreaming on a
# random-weight model (docs/architecture.md, "Cross-checked against SimulStreaming").
#   scripts/simulstreaming_compare/compare.sh SIMULSTREAMING_CHECKOUT AUDIO.wav SEED [WORKDIR]
# Needs Debian's python3-torch python3-numpy python3-regex, a release build
# (earshot, earshot-make-model), and a SimulStreaming checkout (github:ufal/SimulStreaming),
# which stays outside this repository. EARSHOT_CMP_DIMS overrides the model's
# dimensions (default "--n-state 64 --n-head 2 --n-layer 2"). Exit status 0 when
# every pass agrees or differs only at or after an exact tie.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
checkout="$1" audio="$2" seed="$3" work="${4:-/tmp/earshot-simulstreaming}"
mkdir -p "$work"
bin="$root/build/release"
dims="${EARSHOT_CMP_DIMS:---n-state 64 --n-head 2 --n-layer 2}"
model="$work/rand$seed.bin"
"$bin/tools/make_model/earshot-make-model" --template "$root/../shared/models/for-tests-ggml-tiny.en.bin" \
  --vocab-tiktoken "$root/../shared/models/whisper-gpt2.tiktoken" --out "$model" --seed "$seed" --type f32 \
  $dims >/dev/null
/usr/bin/python3 "$here/ggml_to_whisper_pt.py" "$model" "$work/rand$seed.en.pt" >/dev/null
name="$(basename "$audio" .wav)-$seed"
/usr/bin/python3 "$here/run_simulstreaming.py" "$checkout" "$work/rand$seed.en.pt" "$audio" "$work/$name.ref.jsonl" >/dev/null
"$bin/src/cli/earshot" transcribe "$audio" --model "$model" --threads 1 --chunk 1 --language en --beams 1 \
  --frame-threshold 25 --audio-max-len 30 --audio-min-len 0 --flash-attention off \
  --guards off --attention-window all --nonspeech-prob 1 --trace "$work/$name.earshot.jsonl" >/dev/null 2>&1
/usr/bin/python3 "$here/compare_traces.py" "$work/$name.earshot.jsonl" "$work/$name.ref.jsonl"

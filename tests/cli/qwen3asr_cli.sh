#!/bin/sh
# `earshot transcribe` and `earshot bench` with the Qwen3-ASR family end to end on
# a generated tiny pair (the mmproj found beside the text GGUF): AlignAtt and
# rolling transcribe jfk.wav to timed words (rolling with Hugging Face's mel
# frame count), and bench measures both policies with their compute figures.
#   qwen3asr_cli.sh EARSHOT MAKE_QWEN3ASR QWEN2_VOCAB JFK_WAV OUT_DIR
set -eu
earshot=$1 make=$2 vocab=$3 jfk=$4 out=$5
rm -rf "$out" && mkdir -p "$out/dataset"
ln -s "$jfk" "$out/dataset/jfk.wav"
ln -s "${jfk%.wav}.txt" "$out/dataset/jfk.txt"
"$make" --vocab "$vocab" --out "$out/pair" --seed 3 >/dev/null
words='"words":\[\{"text":"[^"]+","start":[0-9.]+,"end":[0-9.]+'
"$earshot" transcribe "$jfk" --model "$out/pair.gguf" --threads 1 --language en --format json >"$out/alignatt.json"
grep -Eq "$words" "$out/alignatt.json" || { echo "alignatt: no timed words"; cat "$out/alignatt.json"; exit 1; }
"$earshot" transcribe "$jfk" --model "$out/pair.gguf" --threads 1 --language en --policy rolling \
  --qwen3-mel-frames hf --format json >"$out/rolling.json"
grep -Eq "$words" "$out/rolling.json" || { echo "rolling: no timed words"; cat "$out/rolling.json"; exit 1; }
"$earshot" bench --dataset "$out/dataset" --model "$out/pair.gguf" --policy alignatt,rolling --threads 1 \
  --language en --json "$out/bench.json" >"$out/bench.txt" 2>&1 || { cat "$out/bench.txt"; exit 1; }
# Each system (in order) with Qwen3-ASR's detail line, then its compute figures with encoder passes.
seen=$(tr -d '\n' <"$out/bench.json" |
  grep -Eo '"name":"[a-z]+","detail":"[^"]*libllama \+ libmtmd|"compute":\{"available":true,"encoder_passes":[1-9]' |
  sed -E 's/^"name":"([a-z]+)".*/\1/; s/^"compute".*/compute/' | tr '\n' ' ')
[ "$seen" = "alignatt compute rolling compute " ] || { echo "bench: got '$seen'"; cat "$out/bench.txt"; exit 1; }
echo qwen3asr-cli-ok

#!/usr/bin/env python3
"""Converts a FastConformer transducer in a Hugging Face-style folder (config.json:
the NeMo model config as JSON; model.safetensors: the state dict under NeMo's
tensor names; tokenizer.model or vocab.txt) to earshot's GGUF
(docs/fastconformer-gguf.md), with the same mapping and refusals as nemo_to_gguf.py.

  PYTHONPATH=third_party/src/llama.cpp/gguf-py \\
    python3 scripts/convert/safetensors_to_gguf.py MODEL_DIR parakeet.gguf [--type f16]

safetensors is parsed by hand (an 8-byte little-endian header length, a JSON
header of name -> dtype, shape, data_offsets, then the raw data); F32, F16 and
BF16 (the upper half of an f32) are read. Needs python3-numpy only.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastconformer_gguf as fg  # noqa: E402
from nemo_to_gguf import sentencepiece_pieces  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise fg.ConvertError(f"{path}: truncated (no header length)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise fg.ConvertError(f"{path}: the header length {n} runs past the file's {len(data)} bytes")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as e:
        raise fg.ConvertError(f"{path}: the header is not JSON ({e})") from e
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if not 0 <= begin <= end <= len(body):
            raise fg.ConvertError(f"{path}: tensor {name}'s data [{begin}, {end}) lies outside the file")
        raw = body[begin:end]
        count = int(np.prod(shape)) if shape else 1
        if dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype in ("I64", "I32"):
            continue  # counters (num_batches_tracked): no place in the layout
        else:
            raise fg.ConvertError(f"{path}: tensor {name} has dtype {dtype} (F32, F16 or BF16)")
        if a.size != count:
            raise fg.ConvertError(f"{path}: tensor {name} holds {a.size} values, its shape {shape} says {count}")
        out[name] = a.reshape(shape)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("gguf")
    ap.add_argument("--type", choices=["f32", "f16"], default="f32", help="type of the matrices (the rest is f32)")
    ap.add_argument("--features", choices=["auto", "checkpoint", "computed"], default="auto",
                    help="filter bank and window: the checkpoint's buffers, or computed as NeMo does")
    args = ap.parse_args(argv)
    try:
        with open(os.path.join(args.model_dir, "config.json")) as f:
            cfg = json.load(f)
        state = read_safetensors(os.path.join(args.model_dir, "model.safetensors"))
        spm, vocab = os.path.join(args.model_dir, "tokenizer.model"), os.path.join(args.model_dir, "vocab.txt")
        if os.path.exists(spm):
            with open(spm, "rb") as f:
                pieces = sentencepiece_pieces(f.read())
        elif os.path.exists(vocab):
            with open(vocab, encoding="utf-8") as f:
                pieces = f.read().splitlines()
        else:
            raise fg.ConvertError(f"{args.model_dir}: no tokenizer.model or vocab.txt")
        hp = fg.hparams_from_config(cfg)
        tensors = fg.tensors_from_state_dict(state, hp, cfg)
        fb, window, source = fg.featuriser(state, hp, args.features)
        fg.write_gguf(args.gguf, hp, pieces, tensors, fb, window, args.type)
    except (OSError, fg.ConvertError) as e:
        print(f"safetensors_to_gguf: {e}", file=sys.stderr)
        return 2
    print(f"safetensors_to_gguf: wrote {args.gguf} ({len(tensors)} tensors, {len(pieces)} pieces, "
          f"filter bank and window: {source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Converts a NeMo FastConformer transducer checkpoint (.nemo: a tar holding
model_config.yaml, model_weights.ckpt and the tokenizer) to earshot's GGUF
(docs/fastconformer-gguf.md), or a Sortformer diarizer's (no tokenizer) to
earshot's Sortformer GGUF (docs/sortformer-gguf.md).

  PYTHONPATH=third_party/src/llama.cpp/gguf-py \\
    python3 scripts/convert/nemo_to_gguf.py parakeet-tdt-0.6b-v3.nemo parakeet.gguf [--type f16]

Needs Debian's python3-numpy, python3-torch and python3-yaml. Refuses (exit 2,
naming the key and the value) any config value the loader would not compute as
NeMo does. The filter bank and window come from the checkpoint's
preprocessor.featurizer.fb/window buffers when present (--features auto), else
are computed as NeMo does (Slaney mel; the window with periodic=False).
"""
import argparse
import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastconformer_gguf as fg  # noqa: E402
import sortformer_gguf as sg  # noqa: E402


def _member(tar, suffix):
    names = [m for m in tar.getmembers() if m.isfile() and os.path.basename(m.name).endswith(suffix)]
    return names[0] if names else None


def sentencepiece_pieces(data):
    """The pieces of a SentencePiece ModelProto (field 1: repeated SentencePiece, whose field 1 is the piece)."""
    def varint(buf, pos):
        shift = value = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7

    pieces, pos = [], 0
    while pos < len(data):
        tag, pos = varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, pos = varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = varint(data, pos)
            if field == 1:
                sub, p, piece = data[pos:pos + length], 0, None
                while p < len(sub):
                    t, p = varint(sub, p)
                    if t & 7 == 2:
                        n, p = varint(sub, p)
                        if t >> 3 == 1:
                            piece = sub[p:p + n].decode("utf-8")
                        p += n
                    elif t & 7 == 0:
                        _, p = varint(sub, p)
                    elif t & 7 == 5:
                        p += 4
                    elif t & 7 == 1:
                        p += 8
                    else:
                        raise fg.ConvertError("the SentencePiece model is not a valid ModelProto")
                if piece is None:
                    raise fg.ConvertError("a SentencePiece entry has no piece")
                pieces.append(piece)
            pos += length
        else:
            raise fg.ConvertError("the SentencePiece model is not a valid ModelProto")
    return pieces


def load_nemo(path):
    import torch
    import yaml

    with tarfile.open(path) as tar:
        cfg_member, ckpt_member = _member(tar, "model_config.yaml"), _member(tar, "model_weights.ckpt")
        if cfg_member is None or ckpt_member is None:
            raise fg.ConvertError(f"{path}: not a .nemo (no model_config.yaml or model_weights.ckpt)")
        cfg = yaml.safe_load(tar.extractfile(cfg_member).read())
        checkpoint = torch.load(io.BytesIO(tar.extractfile(ckpt_member).read()), map_location="cpu")
        sd = checkpoint.get("state_dict", checkpoint)
        state = {k: v.float().numpy() for k, v in sd.items() if hasattr(v, "numpy") and v.is_floating_point()}
        if sg.is_sortformer(cfg):
            return cfg, state, None
        spm = _member(tar, ".model")
        vocab = _member(tar, "vocab.txt")
        tokenizer_type = (cfg.get("tokenizer") or {}).get("type", "bpe")
        if tokenizer_type not in ("bpe", "wpe"):
            raise fg.ConvertError(f"config tokenizer.type = {tokenizer_type!r} is not supported (bpe, wpe)")
        if spm is not None:
            pieces = sentencepiece_pieces(tar.extractfile(spm).read())
        elif vocab is not None:
            pieces = tar.extractfile(vocab).read().decode("utf-8").splitlines()
        else:
            raise fg.ConvertError(f"{path}: no tokenizer (a SentencePiece .model or vocab.txt)")
    return cfg, state, pieces


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("nemo")
    ap.add_argument("gguf")
    ap.add_argument("--type", choices=["f32", "f16", "q8_0"], default="f32",
                    help="type of the matrices (the rest is f32; q8_0: Sortformer only)")
    ap.add_argument("--features", choices=["auto", "checkpoint", "computed"], default="auto",
                    help="filter bank and window: the checkpoint's buffers, or computed as NeMo does")
    args = ap.parse_args(argv)
    try:
        cfg, state, pieces = load_nemo(args.nemo)
        if pieces is None:
            hp = sg.hparams_from_config(cfg)
            tensors = sg.tensors_from_state_dict(state, hp)
            fb, window, source = fg.featuriser(state, hp, args.features)
            sg.write_gguf(args.gguf, hp, tensors, fb, window, args.type)
            print(f"nemo_to_gguf: wrote {args.gguf} (Sortformer, {len(tensors)} tensors, filter bank and window: "
                  f"{source})")
            return 0
        if args.type == "q8_0":
            raise fg.ConvertError("--type q8_0 is for Sortformer checkpoints only")
        hp = fg.hparams_from_config(cfg)
        tensors = fg.tensors_from_state_dict(state, hp, cfg)
        fb, window, source = fg.featuriser(state, hp, args.features)
        fg.write_gguf(args.gguf, hp, pieces, tensors, fb, window, args.type)
    except fg.ConvertError as e:
        print(f"nemo_to_gguf: {e}", file=sys.stderr)
        return 2
    print(f"nemo_to_gguf: wrote {args.gguf} ({len(tensors)} tensors, {len(pieces)} pieces, "
          f"filter bank and window: {source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

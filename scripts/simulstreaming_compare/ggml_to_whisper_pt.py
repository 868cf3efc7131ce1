#!/usr/bin/python3
"""Converts a whisper.cpp ggml model file (f32/f16, e.g. one written by
earshot-make-model) to the PyTorch checkpoint openai-whisper and SimulStreaming
load: {"dims": ModelDimensions fields, "model_state_dict": tensors}.

    python3 ggml_to_whisper_pt.py MODEL.bin OUT

The tensor names in a ggml file are the state-dict names (whisper.cpp's
convert-pt-to-ggml.py keeps them); ggml lists dimensions innermost first, and
stores the conv biases as [n, 1]."""
import struct
import sys

import numpy as np
import torch


def main(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    at = 0

    def i32(n=1):
        nonlocal at
        v = struct.unpack_from("<%di" % n, data, at)
        at += 4 * n
        return v if n > 1 else v[0]

    if i32() != 0x67676D6C:
        sys.exit(f"{src}: not a whisper.cpp ggml file")
    names = ["n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
             "n_text_state", "n_text_head", "n_text_layer", "n_mels"]
    hp = dict(zip(names, i32(10)))
    ftype = i32()
    n_mel, n_fft = i32(2)
    at += 4 * n_mel * n_fft  # mel filters: openai-whisper brings its own
    for _ in range(i32()):  # vocabulary
        at += 4 + struct.unpack_from("<i", data, at)[0]
    state = {}
    while at < len(data):
        n_dims, name_len, ttype = i32(3)
        ne = [i32() for _ in range(n_dims)]
        name = data[at:at + name_len].decode()
        at += name_len
        count = int(np.prod(ne))
        if ttype == 0:
            arr = np.frombuffer(data, dtype=np.float32, count=count, offset=at)
            at += 4 * count
        elif ttype == 1:
            arr = np.frombuffer(data, dtype=np.float16, count=count, offset=at).astype(np.float32)
            at += 2 * count
        else:
            sys.exit(f"{name}: tensor type {ttype} (quantised) is not converted; write the model as f32 or f16")
        t = torch.from_numpy(arr.copy()).reshape(list(reversed(ne)))
        if name.endswith("conv1.bias") or name.endswith("conv2.bias"):
            t = t.reshape(-1)
        state[name] = t
    torch.save({"dims": hp, "model_state_dict": state}, dst)
    print(f"wrote {dst}: {len(state)} tensors, dims {hp}, ftype {ftype}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

"""whisper.cpp's own Parakeet converter (third_party/src/whisper.cpp/models/convert-parakeet-to-ggml.py,
whisper.cpp 1.9.1), run as a user runs it on a synthetic .nemo, and earshot on what it writes.

The .nemo holds a model the project's generator wrote (test_converters.py's checkpoint: NeMo's names,
PyTorch's shapes and gate order, split LSTM biases, a 0-dimensional int64 num_batches_tracked), laid out
as NeMo's archives are (<hash>_tokenizer.model, <hash>_tokenizer.vocab, model_config.yaml with the keys
the converter reads). For the converter's two layouts (default: f16 matrices, f32 for the rest and for
every tensor of fewer than 2 dimensions; --use-f32: all f32):
  - the file holds what the converter's reading says it writes (a 0-dimensional f32 num_batches_tracked,
    the types per tensor), so the test covers the layout users have;
  - earshot-parity-parakeet: earshot and libparakeet (the oracle) on that same file agree emission by
    emission, and earshot's GGUF of the same weights gives identical encoder output and emissions;
  - `earshot transcribe --policy native` prints the GGUF's transcript from it;
  - f16: `earshot quantize` to q8_0 writes a file libparakeet decodes as earshot does;
  - a tensor of a type earshot cannot use is refused naming the tensor.

  test_whispercpp_parakeet.py EARSHOT EARSHOT_MAKE_PARAKEET EARSHOT_PARITY_PARAKEET WAV
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_converters as tc  # noqa: E402

CONVERTER = os.path.join(tc.ROOT, "third_party", "src", "whisper.cpp", "models", "convert-parakeet-to-ggml.py")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def whispercpp_nemo(kv, tensors, path):
    """The generated model as a .nemo the converter reads: its config keys and NeMo's tokenizer file names."""
    cfg = tc.nemo_config(kv)
    durations = cfg["model_defaults"]["tdt_durations"]
    cfg["sample_rate"] = cfg["preprocessor"]["sample_rate"]
    cfg["model_defaults"]["num_tdt_durations"] = len(durations)
    sd = tc.nemo_state_dict(kv, tensors, np.random.default_rng(1))
    # Each LSTM bias split in halves: the converter's f32 sum gives the generator's value back exactly.
    p = tc.value(kv, "prediction.embedding_length")
    for name, (_, a) in tensors.items():
        if "bias_h_l" in name:
            i, f, o, g = (a[k * p:(k + 1) * p].astype(np.float32) for k in range(4))
            half = np.concatenate([i, f, g, o]) * np.float32(0.5)
            sd[name.replace("bias_h_l", "bias_ih_l")] = torch.from_numpy(half.copy())
            sd[name.replace("bias_h_l", "bias_hh_l")] = torch.from_numpy(half.copy())
    pieces = kv["tokenizer.pieces"][2]
    tc.write_nemo(path, cfg, sd, pieces, prefix="3f1c2b_", vocab_scores=True)


def legacy_tensors(path):
    """The tensor table of a whisper.cpp Parakeet .bin: name -> (n_dims, ftype, ne, offset of the ftype field)."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 4 + 15 * 4
    n_mel, n_fb = struct.unpack_from("<ii", data, pos)
    pos += 8 + 4 * n_mel * n_fb
    (n_window,) = struct.unpack_from("<i", data, pos)
    n_durations = struct.unpack_from("<i", data, 4 + 13 * 4)[0]
    pos += 4 + 4 * n_window + 4 * n_durations
    (n_pieces,) = struct.unpack_from("<i", data, pos)
    pos += 4
    for _ in range(n_pieces):
        pos += 4 + struct.unpack_from("<i", data, pos)[0]
    out = {}
    while pos < len(data):
        n_dims, length, ftype = struct.unpack_from("<iii", data, pos)
        ne = struct.unpack_from(f"<{n_dims}i", data, pos + 12)
        name = data[pos + 12 + 4 * n_dims:pos + 12 + 4 * n_dims + length].decode()
        out[name] = (n_dims, ftype, ne, pos + 8)
        pos += 12 + 4 * n_dims + length + int(np.prod(ne, dtype=np.int64)) * (2 if ftype == 1 else 4)
    return out


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    earshot, make_parakeet, parity, wav = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        # The two models of the Parakeet parity tests (tests/model/CMakeLists.txt): their seeds and blank biases
        # keep 20-40% of the joint steps emitting, which the parity tool asserts.
        for layout, extra, model_args in (("f16", [], ["--seed", "4", "--type", "f16", "--blank-bias", "1.3"]),
                                          ("f32", ["--use-f32"], ["--seed", "3"])):
            generated = os.path.join(tmp, f"generated-{layout}.gguf")
            subprocess.run([make_parakeet, "--gguf", generated, "--dims", "small"] + model_args, check=True)
            kv, tensors = tc.read_gguf(generated)
            nemo = os.path.join(tmp, f"synthetic-{layout}.nemo")
            whispercpp_nemo(kv, tensors, nemo)
            name = f"whispercpp-{layout}.bin"
            rc, out, err = run([sys.executable, CONVERTER, "--model", nemo, "--out-dir", tmp, "--out-name", name]
                               + extra)
            check(rc == 0, f"{layout}: the converter failed: {err[-2000:]}")
            if rc != 0:
                continue
            converted = os.path.join(tmp, name)

            # The converter's layout, as its code reads.
            table = legacy_tensors(converted)
            counters = [n for n in table if n.endswith("num_batches_tracked")]
            check(len(counters) == tc.value(kv, "block_count"), f"{layout}: {len(counters)} num_batches_tracked")
            check(all(table[n][:2] == (0, 0) for n in counters),
                  f"{layout}: num_batches_tracked is not a 0-dimensional f32: {[table[n] for n in counters]}")
            q = table["encoder.layers.0.self_attn.linear_q.weight"][1]
            check(q == (1 if layout == "f16" else 0), f"{layout}: linear_q has ftype {q}")
            check(table["encoder.layers.0.conv.depthwise_conv.weight"][:2] == (2, 0), f"{layout}: depthwise conv")
            check(table["encoder.pre_encode.conv.0.bias"][:3] == (4, 0, (1, 1, tc.value(kv, "subsampling.channels"),
                                                                        1)), f"{layout}: pre_encode bias")
            check("decoder.prediction.dec_rnn.lstm.bias_h_l0" in table, f"{layout}: no folded LSTM bias")

            # earshot against libparakeet on this file, and against the same weights in earshot's GGUF.
            rc, out, err = run([parity, "--model", converted, "--gguf", generated, "--audio", wav, "--threads", "2"])
            print(out, end="")
            check(rc == 0, f"{layout}: earshot-parity-parakeet failed: {err[-1000:]}")

            # The CLI, offline with the model's own policy.
            texts = []
            for model in (converted, generated):
                rc, out, err = run([earshot, "transcribe", wav, "--model", model, "--policy", "native"])
                check(rc == 0, f"{layout}: earshot transcribe --model {model}: {err[-500:]}")
                texts.append(out)
            check(texts[0].strip() != "" and texts[0] == texts[1], f"{layout}: transcripts differ: {texts}")
            print(f"{layout}: transcript {texts[0].strip()[:80]!r}")

            if layout == "f16":
                # `earshot quantize` of that file is still a whisper.cpp file: libparakeet decodes it as earshot
                # does (every same-mel emission equal; log-probs to the rounding of ggml's quantised dot
                # products, which libparakeet's decoder uses and earshot's host decoder does not).
                q8 = os.path.join(tmp, "whispercpp-q8_0.bin")
                rc, out, err = run([earshot, "quantize", converted, q8, "q8_0"])
                check(rc == 0, f"earshot quantize: {err}")
                rc, out, err = run([parity, "--model", q8, "--audio", wav, "--threads", "2", "--tolerance", "0.05",
                                    "--min-share", "0", "--max-share", "1"])
                print(out, end="")
                check(rc == 0, f"q8_0: earshot-parity-parakeet failed: {err[-1000:]}")

            # A tensor of a type earshot does not use is refused, naming it (f32 -> i32: the same byte size).
            with open(converted, "rb") as f:
                data = bytearray(f.read())
            bad_name = "encoder.layers.1.norm_out.weight"
            struct.pack_into("<i", data, table[bad_name][3], 26)  # GGML_TYPE_I32
            bad = os.path.join(tmp, f"bad-{layout}.bin")
            with open(bad, "wb") as f:
                f.write(data)
            rc, out, err = run([earshot, "transcribe", wav, "--model", bad, "--policy", "native"])
            check(rc != 0 and bad_name in err and "i32" in err, f"{layout}: an i32 norm was not refused: {err!r}")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scripts/convert/nemo_to_gguf.py (and safetensors_to_gguf.py) on a synthetic .nemo built from a model the
project's generator wrote: the checkpoint holds that model's weights under
NeMo's names and PyTorch's shapes and gate order, so the converted GGUF must
carry the same keys and tensors as the generated one and earshot must print the
same transcript from both. Then one refusal per unknown config value.

  test_converters.py EARSHOT EARSHOT_MAKE_PARAKEET WAV

Needs python3-numpy, python3-torch and python3-yaml: a missing one fails here.
"""
import contextlib
import copy
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "convert"))
sys.path.insert(0, os.path.join(ROOT, "third_party", "src", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402
import nemo_to_gguf  # noqa: E402
import safetensors_to_gguf  # noqa: E402

ARCH = "earshot-fastconformer-transducer"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def read_gguf(path):
    r = gguf.GGUFReader(path)
    kv = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.alignment":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            if f.types[1] == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            else:
                val = [f.parts[i].tolist()[0] for i in f.data]
            kv[f.name] = (vt, f.types[1], val)
        elif vt == gguf.GGUFValueType.STRING:
            kv[f.name] = (vt, None, bytes(f.parts[f.data[0]]).decode("utf-8"))
        else:
            kv[f.name] = (vt, None, f.parts[f.data[0]].tolist()[0])
    tensors = {t.name: (t.tensor_type, np.array(t.data).reshape(list(reversed([int(n) for n in t.shape]))))
               for t in r.tensors}
    return kv, tensors


def value(kv, key):
    return kv[f"{ARCH}.{key}"][2]


def nemo_config(kv):
    """A NeMo model_config.yaml for the generated model's hyper-parameters."""
    d, p = value(kv, "embedding_length"), value(kv, "prediction.embedding_length")
    durations = value(kv, "decoder.durations") if value(kv, "decoder.kind") == "tdt" else None
    # A streaming (Nemotron-shaped) model: a multi-lookahead list, its default first, as NeMo's configs have it.
    left, right = value(kv, "attention.context")
    contexts = [[left, right]]
    if f"{ARCH}.attention.right_contexts" in kv:
        contexts += [[left, r] for r in value(kv, "attention.right_contexts") if r != right]
    streaming = {"causal_downsampling": value(kv, "subsampling.causal"),
                 "att_context_size": contexts if len(contexts) > 1 else contexts[0],
                 "att_context_style": value(kv, "attention.context_style"),
                 "conv_norm_type": value(kv, "conv.norm"),
                 "conv_context_size": "causal" if value(kv, "conv.causal") else None}
    config = {
        "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
                         "sample_rate": value(kv, "features.sample_rate"), "normalize": "per_feature",
                         "window_size": 0.025, "window_stride": 0.01, "window": "hann",
                         "features": value(kv, "features.n_mels"), "n_fft": value(kv, "features.n_fft"),
                         "log": True, "frame_splicing": 1, "dither": 1e-05, "pad_to": 0, "pad_value": 0.0},
        "encoder": {"_target_": "nemo.collections.asr.modules.ConformerEncoder",
                    "feat_in": value(kv, "features.n_mels"), "n_layers": value(kv, "block_count"), "d_model": d,
                    "subsampling": "dw_striding", "subsampling_factor": 8, "subsampling_conv_channels":
                    value(kv, "subsampling.channels"), "causal_downsampling": False,
                    "ff_expansion_factor": value(kv, "feed_forward_expansion"), "self_attention_model": "rel_pos",
                    "n_heads": value(kv, "attention.head_count"), "att_context_size": [-1, -1],
                    "att_context_style": "regular", "xscaling": value(kv, "xscaling"), "untie_biases": True,
                    "pos_emb_max_len": value(kv, "audio_ctx"), "conv_kernel_size": value(kv, "conv.kernel_size"),
                    "conv_norm_type": "batch_norm", "conv_context_size": None, "use_bias": False},
        "decoder": {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "vocab_size": value(kv, "vocab_size"),
                    "prednet": {"pred_hidden": p, "pred_rnn_layers": value(kv, "prediction.block_count")}},
        "joint": {"_target_": "nemo.collections.asr.modules.RNNTJoint",
                  "num_extra_outputs": len(durations or []),
                  "jointnet": {"joint_hidden": p, "activation": "relu"}},
        "decoding": {"strategy": "greedy_batch", "greedy": {"max_symbols": value(kv, "decoding.max_symbols")}},
        "model_defaults": {"tdt_durations": durations},
        "tokenizer": {"dir": None, "type": "bpe", "model_path": "nemo:tokenizer.model"},
    }
    config["encoder"].update(streaming)
    if value(kv, "features.normalize") == "none":
        config["preprocessor"]["normalize"] = "NA"
    if f"{ARCH}.prompt.size" in kv:
        # Nemotron 3.5: the language -> one-hot slot dictionary, and the concat flag of its prompt models.
        config["concat"] = True
        config["model_defaults"]["num_prompts"] = value(kv, "prompt.size")
        config["model_defaults"]["prompt_dictionary"] = dict(zip(value(kv, "prompt.languages"),
                                                                 value(kv, "prompt.slots")))
    return config


def nemo_state_dict(kv, tensors, rng):
    """The generated tensors back in NeMo's state dict: PyTorch shapes, LSTM gates i, f, g, o, split biases."""
    p, c = value(kv, "prediction.embedding_length"), value(kv, "subsampling.channels")
    sd = {}
    for name, (_, a) in tensors.items():
        a = a.astype(np.float32)
        if name.startswith("encoder.pre_encode.conv.") and name.endswith(".bias"):
            a = a.reshape(c)
        elif ".conv.pointwise_conv" in name or ".conv.depthwise_conv" in name:
            a = a.reshape(a.shape[0], 1, a.shape[1]) if "depthwise" in name else a.reshape(*a.shape, 1)
        elif "dec_rnn.lstm." in name:
            i, f, o, g = (a[k * p:(k + 1) * p] for k in range(4))
            a = np.concatenate([i, f, g, o], axis=0)
            if "bias_h_l" in name:
                split = rng.standard_normal(a.shape).astype(np.float32)
                sd[name.replace("bias_h_l", "bias_ih_l")] = torch.from_numpy(a - split)
                sd[name.replace("bias_h_l", "bias_hh_l")] = torch.from_numpy(split)
                continue
        elif name == "preprocessor.featurizer.fb":
            a = a.reshape(1, *a.shape)
        sd[name] = torch.from_numpy(np.ascontiguousarray(a))
        if name.endswith("conv.batch_norm.running_var"):
            sd[name.replace("running_var", "num_batches_tracked")] = torch.tensor(7, dtype=torch.int64)
    return sd


def sentencepiece_model(pieces):
    """A minimal SentencePiece ModelProto: one SentencePiece {piece, score, type} per piece."""
    def varint(n):
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    out = bytearray()
    for i, piece in enumerate(pieces):
        raw = piece.encode("utf-8")
        sub = b"\x0a" + varint(len(raw)) + raw + b"\x15" + np.float32(-i).tobytes() + b"\x18\x01"
        out += b"\x0a" + varint(len(sub)) + sub
    out += b"\x12\x02\x08\x01"  # trainer_spec {model_type: UNIGRAM}: a field the reader must skip
    return bytes(out)


def write_nemo(path, cfg, sd, pieces, prefix="", vocab_scores=False):
    """A .nemo tarball; prefix names the tokenizer files as NeMo's artifacts do
    (a hash and '_'), vocab_scores adds SentencePiece's tokenizer.vocab."""
    with tarfile.open(path, "w") as tar:
        def add(name, data):
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("model_config.yaml", yaml.safe_dump(cfg).encode())
        buf = io.BytesIO()
        torch.save(sd, buf)
        add("model_weights.ckpt", buf.getvalue())
        add(prefix + "tokenizer.model", sentencepiece_model(pieces))
        if vocab_scores:
            add(prefix + "tokenizer.vocab", "".join(f"{piece}\t{-i}\n" for i, piece in enumerate(pieces)).encode())
        add(prefix + "vocab.txt", "\n".join(pieces).encode())


def transcribe(earshot, model, wav):
    r = subprocess.run([earshot, "transcribe", wav, "--model", model], capture_output=True, text=True)
    check(r.returncode == 0, f"earshot transcribe --model {model}: rc {r.returncode}: {r.stderr[-500:]}")
    return r.stdout


def convert_in_process(args, converter=nemo_to_gguf):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = converter.main(args)
    return rc, err.getvalue()


def write_safetensors(path, sd, dtype):
    """safetensors by hand: u64 header length, JSON header, raw little-endian data."""
    header, blobs, offset = {}, [], 0
    for name, t in sd.items():
        a = t.numpy()
        if a.dtype == np.int64:
            raw, dt = a.astype("<i8").tobytes(), "I64"
        elif dtype == "BF16":
            raw, dt = (a.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes(), "BF16"
        elif dtype == "F16":
            raw, dt = a.astype("<f2").tobytes(), "F16"
        else:
            raw, dt = a.astype("<f4").tobytes(), "F32"
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def as_dtype(a, dtype):
    """What a float32 array becomes once stored as dtype and read back."""
    if dtype == "BF16":
        return ((a.astype("<f4").view("<u4") >> 16) << 16).view(np.float32)
    return a.astype(np.float16).astype(np.float32) if dtype == "F16" else a


def check_safetensors(tmp, cfg, sd, pieces, kv, tensors, earshot, wav):
    text = transcribe(earshot, os.path.join(tmp, "generated-tdt.gguf"), wav)
    for dtype in ("F32", "F16", "BF16"):
        folder = os.path.join(tmp, f"hf-{dtype}")
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
            f.write(sentencepiece_model(pieces))
        write_safetensors(os.path.join(folder, "model.safetensors"), sd, dtype)
        out = os.path.join(tmp, f"hf-{dtype}.gguf")
        rc, err = convert_in_process([folder, out], safetensors_to_gguf)
        check(rc == 0, f"safetensors {dtype}: {err}")
        if rc != 0:
            continue
        ckv, ctensors = read_gguf(out)
        check(ckv == kv, f"safetensors {dtype}: keys differ")
        check(set(ctensors) == set(tensors), f"safetensors {dtype}: tensor names differ")
        for name, (t, a) in tensors.items():
            if name not in ctensors:
                continue
            ca = ctensors[name][1]
            if "bias_h_l" in name:  # the sum of two rounded halves
                ok = np.allclose(ca, a, rtol=0, atol=1e-5 if dtype == "F32" else 0.05)
            else:
                ok = ca.shape == a.shape and np.array_equal(ca, as_dtype(a, dtype))
            check(ok, f"safetensors {dtype}: tensor {name} differs")
        if dtype == "F32":
            check(transcribe(earshot, out, wav) == text, "safetensors F32: transcript differs")
    # Refusals: a config value (the same mapping as .nemo) and a truncated file.
    bad = copy.deepcopy(cfg)
    bad["encoder"]["conv_norm_type"] = "instance_norm"
    folder = os.path.join(tmp, "hf-F32")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(bad, f)
    rc, err = convert_in_process([folder, os.path.join(tmp, "hf-bad.gguf")], safetensors_to_gguf)
    check(rc == 2 and "encoder.conv_norm_type" in err and "'instance_norm'" in err, f"safetensors refusal: {err!r}")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    st = os.path.join(folder, "model.safetensors")
    with open(st, "rb") as f:
        data = f.read()
    with open(st, "wb") as f:
        f.write(data[:len(data) // 2])
    rc, err = convert_in_process([folder, os.path.join(tmp, "hf-trunc.gguf")], safetensors_to_gguf)
    check(rc == 2 and "outside the file" in err, f"a truncated safetensors was not refused: {err!r}")


def main():
    earshot, make_parakeet, wav = sys.argv[1:4]
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as tmp:
        for variant, extra in (("tdt", []), ("rnnt", ["--rnnt", "1"]), ("streaming", ["--streaming", "1"]),
                               ("prompt", ["--streaming", "1", "--prompt", "1"])):
            original = os.path.join(tmp, f"generated-{variant}.gguf")
            subprocess.run([make_parakeet, "--gguf", original, "--dims", "small", "--seed", "3"] + extra, check=True)
            kv, tensors = read_gguf(original)
            cfg, sd, pieces = nemo_config(kv), nemo_state_dict(kv, tensors, rng), kv["tokenizer.pieces"][2]
            nemo = os.path.join(tmp, f"synthetic-{variant}.nemo")
            write_nemo(nemo, cfg, sd, pieces)

            # The command line, as a user runs it.
            converted = os.path.join(tmp, f"converted-{variant}.gguf")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "convert", "nemo_to_gguf.py"), nemo,
                                converted], capture_output=True, text=True)
            check(r.returncode == 0, f"{variant}: nemo_to_gguf.py failed: {r.stderr}")
            check("filter bank and window: checkpoint" in r.stdout, f"{variant}: fb/window not from the checkpoint")
            ckv, ctensors = read_gguf(converted)
            check(ckv == kv, f"{variant}: keys differ: " + str(sorted(
                k for k in set(kv) | set(ckv) if kv.get(k) != ckv.get(k))))
            check(set(ctensors) == set(tensors), f"{variant}: tensor names differ: "
                  + str(sorted(set(ctensors) ^ set(tensors))))
            for name, (t, a) in tensors.items():
                if name not in ctensors:
                    continue
                ct, ca = ctensors[name]
                same = ct == t and ca.shape == a.shape and (
                    np.allclose(ca, a, rtol=0, atol=1e-5) if "bias_h_l" in name else np.array_equal(ca, a))
                check(same, f"{variant}: tensor {name} differs ({t} {a.shape} vs {ct} {ca.shape})")
            text = transcribe(earshot, original, wav)
            check(text.strip() != "", f"{variant}: the generated model transcribes nothing (the test proves nothing)")
            check(transcribe(earshot, converted, wav) == text, f"{variant}: transcripts differ")

            # Filter bank and window computed as NeMo does equal the generator's (the same Slaney formula).
            computed = os.path.join(tmp, f"computed-{variant}.gguf")
            rc, err = convert_in_process([nemo, computed, "--features", "computed"])
            check(rc == 0, f"{variant}: --features computed failed: {err}")
            _, comp = read_gguf(computed)
            for n in ("preprocessor.featurizer.fb", "preprocessor.featurizer.window"):
                check(np.allclose(comp[n][1], tensors[n][1], rtol=0, atol=1e-6), f"{variant}: computed {n} differs")
            if variant == "prompt":
                # A prompt kernel whose slots the config does not name is refused, not guessed.
                c = copy.deepcopy(cfg)
                del c["model_defaults"]["prompt_dictionary"]
                path = os.path.join(tmp, "no-dictionary.nemo")
                write_nemo(path, c, sd, pieces)
                out = os.path.join(tmp, "no-dictionary.gguf")
                rc, err = convert_in_process([path, out])
                check(rc == 2 and "prompt_dictionary" in err and not os.path.exists(out),
                      f"a prompt kernel without a dictionary was not refused: rc {rc}, stderr {err!r}")
            if variant in ("rnnt", "streaming", "prompt"):
                continue
            check_safetensors(tmp, cfg, sd, pieces, kv, tensors, earshot, wav)

            # f16 matrices load and keep the rest f32.
            f16 = os.path.join(tmp, "converted-f16.gguf")
            rc, err = convert_in_process([nemo, f16, "--type", "f16"])
            check(rc == 0, f"--type f16 failed: {err}")
            _, t16 = read_gguf(f16)
            check(t16["encoder.layers.0.self_attn.linear_q.weight"][0] == gguf.GGMLQuantizationType.F16, "f16 q")
            check(t16["encoder.layers.0.norm_out.weight"][0] == gguf.GGMLQuantizationType.F32, "f32 norm")
            check(transcribe(earshot, f16, wav).strip() != "", "the f16 conversion transcribes nothing")

            # Refusals: each unknown value, named with its key.
            refusals = [
                ("encoder", "conv_norm_type", "group_norm"),
                ("encoder", "att_context_style", "chunked_unlimited"),
                ("encoder", "subsampling", "vggnet"),
                ("encoder", "self_attention_model", "rel_pos_local_attn"),
                ("encoder", "conv_context_size", [3, 1]),
                ("encoder", "use_bias", True),
                ("preprocessor", "normalize", "all_features"),
                ("preprocessor", "window", "kaiser"),
                ("preprocessor", "log_zero_guard_type", "clamp"),
                ("preprocessor", "frame_splicing", 3),
                ("joint", "jointnet.activation", "tanh"),
                ("decoding", "strategy", "beam"),
            ]
            for section, key, bad in refusals:
                c = copy.deepcopy(cfg)
                node = c[section]
                parts = key.split(".")
                for part in parts[:-1]:
                    node = node[part]
                node[parts[-1]] = bad
                path = os.path.join(tmp, "refused.nemo")
                write_nemo(path, c, sd, pieces)
                out = os.path.join(tmp, "refused.gguf")
                if os.path.exists(out):
                    os.remove(out)
                rc, err = convert_in_process([path, out])
                full = f"{section}.{key}"
                check(rc == 2 and full in err and repr(bad) in err and not os.path.exists(out),
                      f"refusal of {full} = {bad!r}: rc {rc}, stderr {err!r}")
            # A checkpoint tensor with no place in the layout is refused, not dropped.
            extra_sd = dict(sd)
            extra_sd["encoder.layers.0.self_attn.linear_q.bias"] = torch.zeros(4)
            path = os.path.join(tmp, "extra.nemo")
            write_nemo(path, cfg, extra_sd, pieces)
            rc, err = convert_in_process([path, os.path.join(tmp, "extra.gguf")])
            check(rc == 2 and "linear_q.bias" in err, f"an extra tensor was not refused: {err!r}")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Parakeet GGUFs transcribe.cpp and parakeet.cpp publish (both architecture "parakeet"), written from
ONE random checkpoint as each project's converter writes them (published_layouts.py), against the same
weights in earshot's own layout:

  - Parakeet-TDT, RNN-T, Nemotron streaming (cache-aware keys) and Nemotron 3.5 (prompt kernel), f32:
    earshot-fastconformer-encode gives bit-identical encoder (or prompt-kernel) output and greedy emissions
    for each layout, offline and through the streaming encoder; `earshot transcribe` prints the same text;
  - transcribe.cpp with f16 linears and conv kernels (its quantiser's f16 preset) and parakeet.cpp's
    --dtype q8_0: bit-identical to earshot's layout holding the same stored values;
  - what earshot does not compute is refused naming the key (or tensor) and the project;
  - `earshot models` names each layout.

  test_published_gguf.py EARSHOT EARSHOT_MAKE_PARAKEET EARSHOT_FASTCONFORMER_ENCODE WAV
"""
import copy
import logging
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_converters as tc  # noqa: E402
import published_layouts as pl  # noqa: E402
from gguf import GGMLQuantizationType as Q, GGUFValueType as V  # noqa: E402

failures = []
logging.getLogger("gguf").setLevel(logging.ERROR)  # the refusal edits overwrite keys on purpose


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def checkpoint(kv, tensors):
    """The generated model as NeMo's config and state dict; each LSTM bias split in halves (bias_ih and
    bias_hh), so the sum either project stores is the generator's value exactly."""
    cfg = tc.nemo_config(kv)
    sd = tc.nemo_state_dict(kv, tensors, np.random.default_rng(1))
    p = tc.value(kv, "prediction.embedding_length")
    for name, (_, a) in tensors.items():
        if "bias_h_l" in name:
            i, f, o, g = (a[k * p:(k + 1) * p].astype(np.float32) for k in range(4))
            half = np.concatenate([i, f, g, o]) * np.float32(0.5)
            sd[name.replace("bias_h_l", "bias_ih_l")] = torch.from_numpy(half.copy())
            sd[name.replace("bias_h_l", "bias_hh_l")] = torch.from_numpy(half.copy())
    durations = cfg["model_defaults"].get("tdt_durations")
    if durations:
        cfg["decoding"]["durations"] = durations  # where NeMo's TDT configs keep them (both converters read it)
    if "num_prompts" in cfg["model_defaults"]:
        cfg["model_defaults"]["initialize_prompt_feature"] = True
    return cfg, sd


def encode(tool, model, mel, out, streaming=False, language=None):
    args = [tool, "--model", model, "--mel", mel, "--out", out + ".enc", "--emissions", out + ".txt", "--threads", "2"]
    if streaming:
        args += ["--streaming", "1"]
    if language:
        args += ["--language", language]
    rc, _, err = run(args)
    if rc != 0:
        return None, err
    with open(out + ".enc", "rb") as f:
        enc = f.read()
    with open(out + ".txt") as f:
        return (enc, f.read()), ""


def compare(tool, ref_model, model, mel, tmp, what, streaming=False, language=None):
    ref, err = encode(tool, ref_model, mel, os.path.join(tmp, "ref"), streaming, language)
    check(ref is not None, f"{what}: earshot's own layout failed: {err[-800:]}")
    got, err = encode(tool, model, mel, os.path.join(tmp, "got"), streaming, language)
    check(got is not None, f"{what}: the file does not run: {err[-800:]}")
    if ref is None or got is None:
        return
    check(len(ref[0]) > 0 and got[0] == ref[0], f"{what}: encoder output differs")
    check(got[1] == ref[1], f"{what}: emissions differ")
    print(f"{what}: encoder output ({len(ref[0]) // 4} values) and {ref[1].count(chr(10))} emissions identical")


def transcript(earshot, model, wav):
    rc, out, err = run([earshot, "transcribe", wav, "--model", model])
    check(rc == 0, f"earshot transcribe --model {model}: {err[-500:]}")
    return out


def refused(earshot, wav, path, words, what):
    rc, _, err = run([earshot, "transcribe", wav, "--model", path])
    check(rc != 0 and all(w in err for w in words), f"{what}: not refused naming {words}: rc {rc}: {err[-600:]!r}")
    print(f"{what}: {err.strip()}")


def main():
    earshot, make_parakeet, tool, wav = sys.argv[1:5]
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        mel = os.path.join(tmp, "mel.f32")
        rng.standard_normal((212, 128)).astype(np.float32).tofile(mel)
        for variant, extra in (("tdt", []), ("rnnt", ["--rnnt", "1"]), ("streaming", ["--streaming", "1"]),
                               ("prompt", ["--streaming", "1", "--prompt", "1"])):
            original = os.path.join(tmp, f"earshot-{variant}.gguf")
            subprocess.run([make_parakeet, "--gguf", original, "--dims", "small", "--seed", "3"] + extra, check=True)
            kv, tensors = tc.read_gguf(original)
            cfg, sd = checkpoint(kv, tensors)
            pieces = kv["tokenizer.pieces"][2]
            files = {"transcribe.cpp": os.path.join(tmp, f"tc-{variant}.gguf"),
                     "parakeet.cpp": os.path.join(tmp, f"pc-{variant}.gguf")}
            pl.write_transcribe_cpp(files["transcribe.cpp"], cfg, sd, pieces)
            pl.write_parakeet_cpp(files["parakeet.cpp"], cfg, sd, pieces)

            # The layouts as the converters write them.
            tkv, tt = tc.read_gguf(files["transcribe.cpp"])
            check(tkv["general.architecture"][2] == "parakeet" and "stt.parakeet.head_kind" in tkv, "tc keys")
            check(tkv["tokenizer.ggml.tokens"][2] == pieces + ["<blank>"], "tc: the pieces, then the blank")
            check(not any(n.startswith(("encoder.", "preprocessor.")) for n in tt), "tc: NeMo names left")
            b = sd["decoder.prediction.dec_rnn.lstm.bias_ih_l0"].numpy() + sd[
                "decoder.prediction.dec_rnn.lstm.bias_hh_l0"].numpy()
            check(np.array_equal(tt["pred.lstm.0.bias"][1], b), "tc: pred.lstm.0.bias is not bias_ih + bias_hh")
            check(tt["enc.blocks.0.conv.depthwise.weight"][1].ndim == 3, "tc: the depthwise kernel is not 3-D")
            pkv, pt = tc.read_gguf(files["parakeet.cpp"])
            check(pkv["general.architecture"][2] == "parakeet" and "parakeet.arch" in pkv, "pc keys")
            check(pt["preprocessor.featurizer.fb"][1].shape == (1, 128, 257), "pc: fb is not (1, n_mels, bins)")
            check("decoder.prediction.dec_rnn.lstm.bias_ih_l0" in pt and not any(
                n.endswith("num_batches_tracked") for n in pt), "pc: LSTM biases or counters")

            language = "de-DE" if variant == "prompt" else None
            text = transcript(earshot, original, wav)
            check(text.strip() != "", f"{variant}: the generated model transcribes nothing (the test proves nothing)")
            for project, path in files.items():
                compare(tool, original, path, mel, tmp, f"{variant} {project}", language=language)
                if variant in ("streaming", "prompt"):
                    compare(tool, original, path, mel, tmp, f"{variant} {project} streaming", True, language)
                check(transcript(earshot, path, wav) == text, f"{variant} {project}: transcript differs")

            if variant != "tdt":
                continue
            # transcribe.cpp's f16 preset: every linear and conv kernel f16. earshot keeps the depthwise and
            # pre-encode kernels f32: its file holds the same f16-rounded values.
            f16 = {n: Q.F16 for n in tt if n.endswith((".weight", ".Wx", ".Wh")) and not (
                "norm" in n or ".bn." in n or n.endswith(("bias", "pos_bias_u", "pos_bias_v")))}
            tc16 = os.path.join(tmp, "tc-f16.gguf")
            pl.write_transcribe_cpp(tc16, cfg, sd, pieces, types=f16)
            rounded = {n: a.astype(np.float16).astype(np.float32) for n, (_, a) in tensors.items()
                       if n.endswith("depthwise_conv.weight") or (n.startswith("encoder.pre_encode.conv.")
                                                                   and n.endswith(".weight"))}
            matrices = {n: Q.F16 for n in tensors if pl_matrix(n)}
            ours16 = os.path.join(tmp, "earshot-f16.gguf")
            pl.rewrite_earshot(kv, tensors, ours16, matrices, rounded)
            compare(tool, ours16, tc16, mel, tmp, "tdt transcribe.cpp f16")
            check(transcript(earshot, tc16, wav) == transcript(earshot, ours16, wav), "tc f16: transcript differs")
            # parakeet.cpp --dtype q8_0: its allowlisted linears q8_0 (gguf-py's quantiser, the bytes in both).
            pc8 = os.path.join(tmp, "pc-q8_0.gguf")
            pl.write_parakeet_cpp(pc8, cfg, sd, pieces, dtype="q8_0")
            q8 = {t.name: Q.Q8_0 for t in tc.gguf.GGUFReader(pc8).tensors if t.tensor_type == Q.Q8_0}
            check(len(q8) > 10, f"pc q8_0: only {len(q8)} q8_0 tensors")
            ours8 = os.path.join(tmp, "earshot-q8_0.gguf")
            pl.rewrite_earshot(kv, tensors, ours8, q8)
            compare(tool, ours8, pc8, mel, tmp, "tdt parakeet.cpp q8_0")

            # `earshot models` names the layouts.
            cache = os.path.join(tmp, "cache")
            os.makedirs(cache)
            for path in list(files.values()) + [original]:
                shutil.copy(path, cache)
            rc, out, err = run([earshot, "models", "--cache-dir", cache])
            check(rc == 0 and "transcribe.cpp Parakeet GGUF" in out and "parakeet.cpp GGUF" in out
                  and "earshot GGUF" in out, f"earshot models: {out[-1500:]} {err[-300:]}")

            # Refusals, each naming the key (or tensor) and the project.
            def tc_bad(name, extra_kv, words):
                path = os.path.join(tmp, f"tc-bad-{name}.gguf")
                pl.write_transcribe_cpp(path, cfg, sd, pieces, extra=extra_kv)
                refused(earshot, wav, path, words + ["transcribe.cpp"], f"transcribe.cpp {name}")

            def pc_bad(name, extra_kv, words, state=None):
                path = os.path.join(tmp, f"pc-bad-{name}.gguf")
                pl.write_parakeet_cpp(path, cfg, state or sd, pieces, extra=extra_kv)
                refused(earshot, wav, path, words + ["parakeet.cpp"], f"parakeet.cpp {name}")

            tc_bad("ctc", [("stt.parakeet.head_kind", "ctc", V.STRING)], ["stt.parakeet.head_kind", "'ctc'"])
            tc_bad("bias", [("stt.parakeet.encoder.use_bias", True, V.BOOL)], ["stt.parakeet.encoder.use_bias"])
            tc_bad("rc", [("stt.parakeet.encoder.att_context_style", "chunked_limited_with_rc", V.STRING)],
                   ["stt.parakeet.encoder.att_context_style", "chunked_limited_with_rc"])
            tc_bad("spk", [("stt.parakeet.encoder.spk_kernel_layers", [0], V.ARRAY)],
                   ["stt.parakeet.encoder.spk_kernel_layers"])
            tc_bad("window", [("stt.frontend.window", "hamming", V.STRING)], ["stt.frontend.window", "'hamming'"])
            pc_bad("ctc", [("parakeet.arch", "ctc", V.STRING)], ["parakeet.arch", "'ctc'"])
            pc_bad("power", [("parakeet.preprocessor.mag_power", 1.0, V.FLOAT32)], ["parakeet.preprocessor.mag_power"])
            biased = dict(sd)
            biased["encoder.layers.0.self_attn.linear_q.bias"] = torch.zeros(tc.value(kv, "embedding_length"))
            pc_bad("bias", [], ["encoder.layers.0.self_attn.linear_q.bias", "use_bias"], biased)
            # A missing tensor is named under the project's name.
            broken = copy.deepcopy(cfg)
            broken["decoder"]["prednet"]["pred_rnn_layers"] = 3
            path = os.path.join(tmp, "tc-missing.gguf")
            state = dict(sd)
            for k in ("weight_ih_l2", "weight_hh_l2", "bias_ih_l2", "bias_hh_l2"):
                state["decoder.prediction.dec_rnn.lstm." + k] = sd["decoder.prediction.dec_rnn.lstm." +
                                                                   k.replace("2", "1")]
            pl.write_transcribe_cpp(path, broken, state, pieces)
            with open(path, "r+b") as f:  # rename pred.lstm.2.Wx out of the layout's reach
                data = f.read()
                f.seek(data.index(b"pred.lstm.2.Wx"))
                f.write(b"pred.lstm.2.Wy")
            refused(earshot, wav, path, ["pred.lstm.2.Wx", "transcribe.cpp"], "a missing transcribe.cpp tensor")
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("ok")
    return 0


def pl_matrix(name):
    """earshot's is_matrix_tensor (docs/fastconformer-gguf.md): the tensors its layout stores f16 or quantised."""
    suffixes = ("linear1.weight", "linear2.weight", "pointwise_conv1.weight", "pointwise_conv2.weight",
                "linear_q.weight", "linear_k.weight", "linear_v.weight", "linear_out.weight", "linear_pos.weight",
                "pre_encode.out.weight", "joint.enc.weight", "joint.pred.weight", "joint.joint_net.2.weight",
                "prediction.embed.weight", "prompt_kernel.0.weight", "prompt_kernel.2.weight")
    return name.endswith(suffixes) or "dec_rnn.lstm.weight_" in name


if __name__ == "__main__":
    sys.exit(main())

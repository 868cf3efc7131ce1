"""An independent PyTorch FastConformer transducer, written from NeMo's published
architecture (ConvSubsampling with CausalConv2D, RelPositionalEncoding,
RelPositionMultiHeadAttention with rel_shift, ConformerConvolution with a causal
depthwise conv and BatchNorm or LayerNorm, the chunked_limited / regular masks as
ConformerEncoder builds them, greedy RNN-T/TDT), run on the same random GGUFs as
earshot's ggml encoder (earshot-fastconformer-encode), offline and streamed.

It checks what libparakeet cannot: causal subsampling, LayerNorm conv, the
attention masks, RNN-T without durations, Nemotron 3.5's language prompt kernel
(the encoder output concatenated with a one-hot of the language's slot ->
Linear -> ReLU -> Linear, replacing the encoder output before the joint, as
NeMo's prompt models apply `prompt_kernel(cat([encoded, prompt], -1))`), forced
and auto slots; and, as a control, a Parakeet-shaped
model (the parts libparakeet checks). Fails (exit 1) on any difference above
tolerance, and when torch or numpy is missing.

usage: fastconformer_reference.py EARSHOT_MAKE_PARAKEET EARSHOT_FASTCONFORMER_ENCODE
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "third_party", "src", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402

ARCH = "earshot-fastconformer-transducer"
torch.set_num_threads(1)


class Gguf:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.kv = {}
        for f in r.fields.values():
            if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
                if f.types[-1] == gguf.GGUFValueType.STRING:
                    self.kv[f.name] = [bytes(f.parts[i]).decode() for i in f.data]
                else:
                    self.kv[f.name] = [f.parts[i].tolist()[0] for i in f.data]
            elif f.types and f.types[0] == gguf.GGUFValueType.STRING:
                self.kv[f.name] = bytes(f.parts[f.data[0]]).decode()
            elif f.types:
                self.kv[f.name] = f.parts[f.data[0]].tolist()[0]
        # numpy shape = reversed ggml ne: a linear's [out, in], a conv's [out, in/groups, kT, kF].
        self.t = {t.name: torch.from_numpy(np.array(t.data, dtype=np.float32).reshape(
            list(reversed([int(n) for n in t.shape])))) for t in r.tensors}

    def __getitem__(self, key):
        return self.kv[f"{ARCH}.{key}"]


def subsampling(m, mel):
    """NeMo's ConvSubsampling, dw_striding: [T, F] -> [T', d]."""
    causal = m["subsampling.causal"]
    c = m["subsampling.channels"]
    x = mel[None, None]  # [B, 1, T, F]

    def conv(i, x, stride, groups):
        w = m.t[f"encoder.pre_encode.conv.{i}.weight"]
        b = m.t[f"encoder.pre_encode.conv.{i}.bias"].reshape(c)
        if stride == 1:
            return F.conv2d(x, w, b)
        if causal:  # CausalConv2D: left = kernel - 1, right = stride - 1, on both axes
            return F.conv2d(F.pad(x, (2, 1, 2, 1)), w, b, stride=2, groups=groups)
        return F.conv2d(x, w, b, stride=2, padding=1, groups=groups)

    x = F.relu(conv(0, x, 2, 1))
    x = F.relu(conv(3, conv(2, x, 2, c), 1, 1))
    x = F.relu(conv(6, conv(5, x, 2, c), 1, 1))
    b, ch, t, f = x.shape
    x = x.transpose(1, 2).reshape(b, t, ch * f)
    x = F.linear(x, m.t["encoder.pre_encode.out.weight"], m.t["encoder.pre_encode.out.bias"])
    if m["xscaling"]:
        x = x * math.sqrt(m["embedding_length"])
    return x[0]


def rel_pos_emb(T, d):
    positions = torch.arange(T - 1, -T, -1, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * -(math.log(10000.0) / d))
    pe = torch.zeros(2 * T - 1, d)
    pe[:, 0::2] = torch.sin(positions * div)
    pe[:, 1::2] = torch.cos(positions * div)
    return pe


def attention_mask(m, right, T):
    """True = masked, as ConformerEncoder._create_masks builds it."""
    left = m["attention.context"][0]
    style = m.kv.get(f"{ARCH}.attention.context_style", "regular")
    allowed = torch.ones(T, T, dtype=torch.bool)
    if style == "chunked_limited" and right >= 0:
        chunk = right + 1
        left_chunks = left // chunk if left >= 0 else 10000
        idx = torch.div(torch.arange(T), chunk, rounding_mode="trunc")
        diff = idx[:, None] - idx[None, :]
        allowed = (diff <= left_chunks) & (diff >= 0)
    else:
        if left >= 0:
            allowed = allowed.triu(diagonal=-left)
        if right >= 0:
            allowed = allowed.tril(diagonal=right)
    return ~allowed


def rel_shift(x):
    b, h, qlen, pos_len = x.size()
    x = F.pad(x, pad=(1, 0))
    x = x.view(b, h, -1, qlen)
    return x[:, :, 1:].view(b, h, qlen, pos_len)


def layer(m, i, x, pos_emb, mask):
    p = f"encoder.layers.{i}."
    t = m.t
    d, H = m["embedding_length"], m["attention.head_count"]
    dh, eps, K = d // H, m["attention.layer_norm_epsilon"], m["conv.kernel_size"]

    def ln(x, name):
        return F.layer_norm(x, (d,), t[p + name + ".weight"], t[p + name + ".bias"], eps)

    def ffn(x, n):
        return F.linear(F.silu(F.linear(x, t[p + f"feed_forward{n}.linear1.weight"])), t[p + f"feed_forward{n}.linear2.weight"])

    residual = x
    residual = residual + 0.5 * ffn(ln(residual, "norm_feed_forward1"), 1)
    # RelPositionMultiHeadAttention.
    y = ln(residual, "norm_self_att")
    T = y.shape[0]
    q = F.linear(y, t[p + "self_attn.linear_q.weight"]).view(1, T, H, dh)
    k = F.linear(y, t[p + "self_attn.linear_k.weight"]).view(1, T, H, dh).transpose(1, 2)
    v = F.linear(y, t[p + "self_attn.linear_v.weight"]).view(1, T, H, dh).transpose(1, 2)
    pp = F.linear(pos_emb, t[p + "self_attn.linear_pos.weight"]).view(1, -1, H, dh).transpose(1, 2)
    q_u = (q + t[p + "self_attn.pos_bias_u"]).transpose(1, 2)
    q_v = (q + t[p + "self_attn.pos_bias_v"]).transpose(1, 2)
    ac = torch.matmul(q_u, k.transpose(-2, -1))
    bd = rel_shift(torch.matmul(q_v, pp.transpose(-2, -1)))[:, :, :, :T]
    scores = (ac + bd) / math.sqrt(dh)
    if mask is not None:
        scores = scores.masked_fill(mask, -10000.0)
    attn = torch.softmax(scores, dim=-1)
    if mask is not None:
        attn = attn.masked_fill(mask, 0.0)
    y = torch.matmul(attn, v).transpose(1, 2).reshape(T, d)
    residual = residual + F.linear(y, t[p + "self_attn.linear_out.weight"])
    # ConformerConvolution.
    y = ln(residual, "norm_conv").T[None]  # [1, d, T]
    y = F.glu(F.conv1d(y, t[p + "conv.pointwise_conv1.weight"][:, :, None]), dim=1)
    y = F.pad(y, (K - 1, 0) if m["conv.causal"] else ((K - 1) // 2, (K - 1) // 2))
    y = F.conv1d(y, t[p + "conv.depthwise_conv.weight"][:, None, :], groups=d)
    if m["conv.norm"] == "layer_norm":
        y = F.layer_norm(y.transpose(1, 2), (d,), t[p + "conv.batch_norm.weight"], t[p + "conv.batch_norm.bias"],
                         eps).transpose(1, 2)
    else:
        y = F.batch_norm(y, t[p + "conv.batch_norm.running_mean"], t[p + "conv.batch_norm.running_var"],
                         t[p + "conv.batch_norm.weight"], t[p + "conv.batch_norm.bias"], False, 0.0, 1e-5)
    y = F.conv1d(F.silu(y), t[p + "conv.pointwise_conv2.weight"][:, :, None])
    residual = residual + y[0].T
    residual = residual + 0.5 * ffn(ln(residual, "norm_feed_forward2"), 2)
    return ln(residual, "norm_out")


def encode(m, mel, right):
    x = subsampling(m, mel)
    T, d = x.shape
    limited = m["attention.context"][0] >= 0 or right >= 0
    mask = attention_mask(m, right, T) if limited else None
    pos_emb = rel_pos_emb(T, d)
    for i in range(m["block_count"]):
        x = layer(m, i, x, pos_emb, mask)
    return x


def prompt_kernel(m, enc, language):
    """Nemotron 3.5's prompt kernel: cat(enc, one_hot(slot)) -> Linear -> ReLU -> Linear."""
    slots = dict(zip(m["prompt.languages"], m["prompt.slots"]))
    one_hot = torch.zeros(enc.shape[0], m["prompt.size"])
    one_hot[:, slots[language]] = 1.0
    x = torch.cat([enc, one_hot], dim=-1)
    x = F.relu(F.linear(x, m.t["prompt_kernel.0.weight"], m.t["prompt_kernel.0.bias"]))
    return F.linear(x, m.t["prompt_kernel.2.weight"], m.t["prompt_kernel.2.bias"])


def greedy(m, enc):
    """Greedy RNN-T (TDT when the file has durations) from the GGUF's packed LSTM (gates i, f, o, c)."""
    t = m.t
    n_vocab, P, L = m["vocab_size"], m["prediction.embedding_length"], m["prediction.block_count"]
    durations = m.kv.get(f"{ARCH}.decoder.durations", []) if m["decoder.kind"] == "tdt" else []
    blank, max_symbols = n_vocab, m["decoding.max_symbols"]
    h = [torch.zeros(P) for _ in range(L)]
    c = [torch.zeros(P) for _ in range(L)]

    def predict(token):
        x = t["decoder.prediction.embed.weight"][token]
        for i in range(L):
            lstm = "decoder.prediction.dec_rnn.lstm."
            g = t[f"{lstm}weight_ih_l{i}"] @ x + t[f"{lstm}weight_hh_l{i}"] @ h[i] + t[f"{lstm}bias_h_l{i}"]
            gi, gf, go, gc = g.split(P)
            c[i] = torch.sigmoid(gf) * c[i] + torch.sigmoid(gi) * torch.tanh(gc)
            h[i] = torch.sigmoid(go) * torch.tanh(c[i])
            x = h[i]
        return F.linear(x, t["joint.pred.weight"], t["joint.pred.bias"])

    pred = predict(blank)
    enc_proj = F.linear(enc, t["joint.enc.weight"], t["joint.enc.bias"])
    out, frame, symbols = [], 0, 0
    while frame < enc.shape[0]:
        logits = F.linear(F.relu(enc_proj[frame] + pred), t["joint.joint_net.2.weight"], t["joint.joint_net.2.bias"])
        token = int(torch.argmax(logits[:n_vocab + 1]))
        duration = durations[int(torch.argmax(logits[n_vocab + 1:]))] if durations else 1
        if token == blank:
            frame, symbols = frame + max(duration, 1), 0
            continue
        out.append((token, frame))
        pred = predict(token)
        if durations and duration > 0:
            frame, symbols = frame + duration, 0
        else:
            symbols += 1
            if symbols >= max_symbols:
                frame, symbols = frame + 1, 0
    return out


def main():
    make_parakeet, encode_tool = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(7)
        cases = [("nemotron", ["--streaming", "1", "--seed", "3"], [0, 1, 6, 13], [None]),
                 ("nemotron35", ["--streaming", "1", "--prompt", "1", "--seed", "3"], [13], ["auto", "de-DE"]),
                 ("parakeet", ["--n-layer", "2", "--seed", "3"], [None], [None])]
        by_language = {}
        for name, args, rights, languages in cases:
            path = os.path.join(tmp, name + ".gguf")
            subprocess.run([make_parakeet, "--gguf", path] + args, check=True)
            m = Gguf(path)
            n_frames = 203  # not a multiple of 8: the last frames read the right padding
            mel = rng.standard_normal((n_frames, m["features.n_mels"])).astype(np.float32)
            mel_path = os.path.join(tmp, name + ".mel")
            mel.tofile(mel_path)
            for right, language in [(r, lang) for r in rights for lang in languages]:
                r = right if right is not None else m["attention.context"][1]
                want = encode(m, torch.from_numpy(mel), r)
                if language is not None:
                    want = prompt_kernel(m, want, language)
                want_emissions = greedy(m, want)
                if language is not None:
                    by_language.setdefault(r, {})[language] = want_emissions
                modes = ["offline", "streaming"] if m["subsampling.causal"] else ["offline"]
                for mode in modes:
                    out, em = os.path.join(tmp, "enc.f32"), os.path.join(tmp, "em.txt")
                    cmd = [encode_tool, "--model", path, "--mel", mel_path, "--out", out, "--emissions", em]
                    if right is not None:
                        cmd += ["--right-context", str(right)]
                    if mode == "streaming":
                        cmd += ["--streaming", "1"]
                    if language is not None:
                        cmd += ["--language", language]
                    subprocess.run(cmd, check=True)
                    got = np.fromfile(out, dtype=np.float32)
                    ok = got.size == want.numel()
                    diff = float(np.abs(got.reshape(want.shape) - want.numpy()).max()) if ok else float("inf")
                    with open(em) as f:
                        got_emissions = [tuple(int(v) for v in line.split()) for line in f]
                    same = got_emissions == want_emissions
                    emitting = len({f for _, f in want_emissions})
                    tag = f" {language}" if language is not None else ""
                    print(f"{name}{tag} r={r} {mode}: {want.shape[0]} frames, max abs diff {diff:.2e}, "
                          f"{len(want_emissions)} emissions on {emitting} frames, equal: {same}")
                    if not ok or diff > 1e-4 or not same or not want_emissions:
                        failures += 1
        # The slot must matter: a forced language and auto decode differently.
        for r, runs in by_language.items():
            if runs["auto"] == runs["de-DE"]:
                print(f"nemotron35 r={r}: auto and de-DE gave the same emissions")
                failures += 1
    if failures:
        print(f"FAILED: {failures} case(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

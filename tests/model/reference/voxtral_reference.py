"""An independent PyTorch Voxtral Realtime, written from the published
architecture (Mistral's model card and params.json; transformers'
modeling_voxtral_realtime.py and VoxtralRealtimeFeatureExtractor;
mistral-common's audio padding and streaming prompt; vLLM's voxtral_realtime.py
and whisper_causal.py), reading Mistral's checkpoint layout itself
(consolidated.safetensors with its own names and interleaved RoPE, params.json,
tekken.json: never the GGUF), against earshot's ggml model (earshot-voxtral-run)
on the GGUF scripts/convert/voxtral_gguf.py makes of the same checkpoint:

- the converter's output equals, tensor for tensor (names, shapes, types, bytes),
  what transcribe.cpp's route makes of the checkpoint: transformers'
  convert_voxtral_realtime_weights_to_hf.py mapping and permute_for_rope, then
  transcribe.cpp's convert-voxtral_realtime.py names and reference types (BF16);
- offline: every slot's audio embedding, and every decoded position's logits
  within tolerance, the tokens identical;
- streamed (pushed in pieces): equal to earshot's own offline run bit for bit
  where both encode one slot per encoder graph; with the default (up to 16
  slots a graph) the tokens identical and the logits within tolerance.

Tolerances: audio embeddings 1e-4 of their largest magnitude; logits 1e-3 x
max(1, largest logit) (f32 weights and caches; the differences seen are ~1e-6).

The random checkpoint (small dimensions; windows of 24 encoder frames and 64
decoder positions, so both caches wrap on jfk.wav's first 5 s) is generated here.
Fails (exit 1) on any difference above tolerance, a run with too few text
tokens (the comparison would compare pads), and when torch or numpy is missing.

usage: voxtral_reference.py EARSHOT_VOXTRAL_RUN JFK_WAV [--keep DIR]
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import wave

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts", "convert"))
import voxtral_gguf  # noqa: E402

torch.set_num_threads(1)
ENC = "mm_streams_embeddings.embedding_module.whisper_encoder."
EMB = "mm_streams_embeddings.embedding_module."
N_SPECIAL = 1000
# The STREAMING_PAD row's scale in the random checkpoint: small enough that the
# random decoder says text at many slots (so the comparison compares text tokens).
# jfk.wav's first seconds: with the right padding, past both windows (the rings wrap).
SECONDS = 5
EMB_SCALE = float(os.environ.get("VOXTRAL_EMB_SCALE", "0.03"))
PAD_SCALE = float(os.environ.get("VOXTRAL_PAD_SCALE", "0.5"))


# ---------------------------------------------------------------------------
# A random checkpoint in Mistral's layout.
# ---------------------------------------------------------------------------

def small_params(vocab):
    return {
        "dim": 64, "n_layers": 2, "head_dim": 16, "hidden_dim": 128, "n_heads": 4, "n_kv_heads": 2,
        "use_biases": False, "causal": True, "rope_theta": 1000000.0, "norm_eps": 1e-05, "vocab_size": vocab,
        "tied_embeddings": True, "sliding_window": 64, "max_seq_len": 131072,
        "multimodal": {"whisper_model_args": {
            "encoder_args": {
                "audio_encoding_args": {"sampling_rate": 16000, "frame_rate": 12.5, "num_mel_bins": 128,
                                        "hop_length": 160, "window_size": 400, "global_log_mel_max": 1.5,
                                        "transcription_format": "streaming"},
                "dim": 64, "n_layers": 2, "head_dim": 32, "hidden_dim": 128, "n_heads": 2, "n_kv_heads": 2,
                "use_biases": True, "rope_theta": 1000000.0, "causal": True, "norm_eps": 1e-05, "sliding_window": 24},
            "downsample_args": {"downsample_factor": 4}}},
        "ada_rms_norm_t_cond": True, "ada_rms_norm_t_cond_dim": 8,
    }


def tekken(vocab, seed):
    rng = np.random.default_rng(seed)
    names = {0: "<unk>", 1: "<s>", 2: "</s>", 11: "<pad>", 24: "[AUDIO]", 25: "[BEGIN_AUDIO]",
             32: "[STREAMING_PAD]", 33: "[STREAMING_WORD]"}
    special = [{"rank": i, "token_str": names.get(i, f"<SPECIAL_{i}>"), "is_control": True} for i in range(N_SPECIAL)]
    pieces, seen = [bytes([b]) for b in range(256)], set()
    while len(pieces) < vocab - N_SPECIAL:
        word = (b" " if rng.random() < 0.6 else b"") + bytes(rng.integers(ord("a"), ord("z") + 1, rng.integers(1, 6)))
        if word not in seen:
            seen.add(word)
            pieces.append(word)
    return {
        "config": {"pattern": "", "num_vocab_tokens": len(pieces), "default_vocab_size": vocab,
                   "default_num_special_tokens": N_SPECIAL, "version": "v13"},
        "special_tokens": special,
        "vocab": [{"rank": i, "token_bytes": base64.b64encode(p).decode(), "token_str": None}
                  for i, p in enumerate(pieces)],
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "transcription_delay_ms": 480,
                  "streaming_look_ahead_ms": 2.5, "streaming_look_back_ms": 52.5, "streaming_n_left_pad_tokens": 32,
                  "transcription_format": "streaming",
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }


def random_state(p, seed, pad_scale=2.0):
    g = torch.Generator().manual_seed(seed)
    sd = {}

    def mat(name, *shape, scale=1.0):
        fan_in = shape[1] * (shape[2] if len(shape) > 2 else 1)
        sd[name] = torch.randn(*shape, generator=g) * (scale / math.sqrt(fan_in))

    def norm(name, n):
        sd[name] = 1.0 + 0.1 * torch.randn(n, generator=g)

    def bias(name, n):
        sd[name] = 0.02 * torch.randn(n, generator=g)

    e = p["multimodal"]["whisper_model_args"]["encoder_args"]
    ed, eq, eff, mels = e["dim"], e["n_heads"] * e["head_dim"], e["hidden_dim"], 128
    mat(ENC + "conv_layers.0.conv.weight", ed, mels, 3)
    bias(ENC + "conv_layers.0.conv.bias", ed)
    mat(ENC + "conv_layers.1.conv.weight", ed, ed, 3)
    bias(ENC + "conv_layers.1.conv.bias", ed)
    for i in range(e["n_layers"]):
        s = f"{ENC}transformer.layers.{i}."
        norm(s + "attention_norm.weight", ed)
        mat(s + "attention.wq.weight", eq, ed)
        bias(s + "attention.wq.bias", eq)
        mat(s + "attention.wk.weight", eq, ed)
        mat(s + "attention.wv.weight", eq, ed)
        bias(s + "attention.wv.bias", eq)
        mat(s + "attention.wo.weight", ed, eq)
        bias(s + "attention.wo.bias", ed)
        norm(s + "ffn_norm.weight", ed)
        mat(s + "feed_forward.w1.weight", eff, ed)
        mat(s + "feed_forward.w3.weight", eff, ed)
        mat(s + "feed_forward.w2.weight", ed, eff)
        bias(s + "feed_forward.w2.bias", ed)
    norm(ENC + "transformer.norm.weight", ed)
    d, ff, V, ada = p["dim"], p["hidden_dim"], p["vocab_size"], p["ada_rms_norm_t_cond_dim"]
    mat(EMB + "audio_language_projection.0.weight", d, ed * 4)
    mat(EMB + "audio_language_projection.2.weight", d, d)
    emb = torch.randn(V, d, generator=g)
    # Control tokens rarer than text (as trained ones are), STREAMING_PAD as often as pad_scale says.
    # Rows small beside the audio embeddings, so the slots' audio decides the token
    # (with large rows the random decoder repeats its input token).
    emb *= EMB_SCALE
    emb[:N_SPECIAL] *= 0.3
    emb[32] *= pad_scale / 0.3
    sd[EMB + "tok_embeddings.weight"] = emb
    norm("norm.weight", d)
    for i in range(p["n_layers"]):
        s = f"layers.{i}."
        norm(s + "attention_norm.weight", d)
        norm(s + "ffn_norm.weight", d)
        mat(s + "attention.wq.weight", p["n_heads"] * p["head_dim"], d)
        mat(s + "attention.wk.weight", p["n_kv_heads"] * p["head_dim"], d)
        mat(s + "attention.wv.weight", p["n_kv_heads"] * p["head_dim"], d)
        mat(s + "attention.wo.weight", d, p["n_heads"] * p["head_dim"])
        mat(s + "feed_forward.w1.weight", ff, d)
        mat(s + "feed_forward.w3.weight", ff, d)
        mat(s + "feed_forward.w2.weight", d, ff)
        mat(s + "ada_rms_norm_t_cond.0.weight", ada, d, scale=0.3)
        mat(s + "ada_rms_norm_t_cond.2.weight", d, ada, scale=0.3)
    return sd


def write_safetensors(path, sd, dtype="F32"):
    header, blobs, at = {}, [], 0
    for name, t in sd.items():
        a = t.contiguous()
        if dtype == "BF16":
            raw = a.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        else:
            raw = a.float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------
# transcribe.cpp's route: transformers' mapping, then its converter's names and types.
# ---------------------------------------------------------------------------

def hf_permute(t, n_heads):
    """convert_voxtral_realtime_weights_to_hf.permute_for_rope (weights and biases)."""
    dim1 = t.shape[0]
    if t.dim() == 1:
        return t.view(n_heads, dim1 // n_heads // 2, 2).transpose(1, 2).reshape(dim1)
    return t.view(n_heads, dim1 // n_heads // 2, 2, t.shape[1]).transpose(1, 2).reshape(dim1, t.shape[1])


def transcribe_cpp_tensors(p, sd):
    """name -> (array, 'f32'|'f16'|'bf16') as transcribe.cpp's converter writes its BF16 reference file."""
    e = p["multimodal"]["whisper_model_args"]["encoder_args"]
    hf = {}
    for k, t in sd.items():  # transformers' STATE_DICT_MAPPING and _permute_projection_weights
        if k.startswith(ENC):
            r = k[len(ENC):]
            if r.startswith("conv_layers."):
                n = "model.audio_tower.embedder.conv" + str(int(r.split(".")[1]) + 1) + "." + r.split(".")[-1]
            elif r == "transformer.norm.weight":
                n = "model.audio_tower.norm.weight"
            else:
                _, _, i, rest = r.split(".", 3)
                m = {"attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj",
                     "attention.wv": "self_attn.v_proj", "attention.wo": "self_attn.o_proj",
                     "attention_norm": "self_attn_layer_norm", "feed_forward.w1": "mlp.gate_proj",
                     "feed_forward.w2": "mlp.down_proj", "feed_forward.w3": "mlp.up_proj",
                     "ffn_norm": "final_layer_norm"}
                stem, leaf = rest.rsplit(".", 1)
                n = f"model.audio_tower.layers.{i}.{m[stem]}.{leaf}"
                if stem in ("attention.wq", "attention.wk"):
                    t = hf_permute(t, e["n_heads"])
        elif k.startswith(EMB):
            r = k[len(EMB):]
            n = {"tok_embeddings.weight": "model.language_model.embed_tokens.weight",
                 "audio_language_projection.0.weight": "model.multi_modal_projector.linear_1.weight",
                 "audio_language_projection.2.weight": "model.multi_modal_projector.linear_2.weight"}[r]
        elif k == "norm.weight":
            n = "model.language_model.norm.weight"
        else:
            _, i, rest = k.split(".", 2)
            m = {"attention_norm.weight": "input_layernorm.weight",
                 "ffn_norm.weight": "post_attention_layernorm.weight",
                 "attention.wq.weight": "self_attn.q_proj.weight", "attention.wk.weight": "self_attn.k_proj.weight",
                 "attention.wv.weight": "self_attn.v_proj.weight", "attention.wo.weight": "self_attn.o_proj.weight",
                 "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w2.weight": "mlp.down_proj.weight",
                 "feed_forward.w3.weight": "mlp.up_proj.weight",
                 "ada_rms_norm_t_cond.0.weight": "ada_rms_norm.linear1.weight",
                 "ada_rms_norm_t_cond.2.weight": "ada_rms_norm.linear2.weight"}
            n = f"model.language_model.layers.{i}.{m[rest]}"
            if rest == "attention.wq.weight":
                t = hf_permute(t, p["n_heads"])
            if rest == "attention.wk.weight":
                t = hf_permute(t, p["n_kv_heads"])
        hf[n] = t
    # transcribe.cpp's ENC_TOP_TABLE / ENC_BLOCK_TABLE / PROJ_TABLE / TEXT_TOP_TABLE / TEXT_BLOCK_TABLE.
    table = [("model.audio_tower.embedder.conv1.weight", "enc.conv.0.weight"),
             ("model.audio_tower.embedder.conv1.bias", "enc.conv.0.bias"),
             ("model.audio_tower.embedder.conv2.weight", "enc.conv.1.weight"),
             ("model.audio_tower.embedder.conv2.bias", "enc.conv.1.bias"),
             ("model.audio_tower.norm.weight", "enc.final_norm.weight")]
    for i in range(e["n_layers"]):
        for s, d in [("self_attn_layer_norm.weight", "norm_attn.weight"), ("self_attn.q_proj.weight", "attn.q.weight"),
                     ("self_attn.q_proj.bias", "attn.q.bias"), ("self_attn.k_proj.weight", "attn.k.weight"),
                     ("self_attn.v_proj.weight", "attn.v.weight"), ("self_attn.v_proj.bias", "attn.v.bias"),
                     ("self_attn.o_proj.weight", "attn.out.weight"), ("self_attn.o_proj.bias", "attn.out.bias"),
                     ("final_layer_norm.weight", "norm_ffn.weight"), ("mlp.gate_proj.weight", "ffn.gate.weight"),
                     ("mlp.up_proj.weight", "ffn.up.weight"), ("mlp.down_proj.weight", "ffn.down.weight"),
                     ("mlp.down_proj.bias", "ffn.down.bias")]:
            table.append((f"model.audio_tower.layers.{i}.{s}", f"enc.blocks.{i}.{d}"))
    table += [("model.multi_modal_projector.linear_1.weight", "proj.linear_1.weight"),
              ("model.multi_modal_projector.linear_2.weight", "proj.linear_2.weight"),
              ("model.language_model.embed_tokens.weight", "dec.token_embd.weight"),
              ("model.language_model.norm.weight", "dec.output_norm.weight")]
    for i in range(p["n_layers"]):
        for s, d in [("input_layernorm.weight", "norm_attn.weight"), ("post_attention_layernorm.weight", "norm_ffn.weight"),
                     ("self_attn.q_proj.weight", "attn.q.weight"), ("self_attn.k_proj.weight", "attn.k.weight"),
                     ("self_attn.v_proj.weight", "attn.v.weight"), ("self_attn.o_proj.weight", "attn.o.weight"),
                     ("mlp.gate_proj.weight", "ffn.gate.weight"), ("mlp.up_proj.weight", "ffn.up.weight"),
                     ("mlp.down_proj.weight", "ffn.down.weight"), ("ada_rms_norm.linear1.weight", "ada.linear_1.weight"),
                     ("ada_rms_norm.linear2.weight", "ada.linear_2.weight")]:
            table.append((f"model.language_model.layers.{i}.{s}", f"dec.blocks.{i}.{d}"))
    out = {}
    for src, dst in table:
        # scripts/lib/gguf_common.reference_dtype_for with reference type BF16.
        if dst.endswith(".bias") or ("norm_" in dst and dst.endswith(".weight")) or dst.endswith(
                ".final_norm.weight") or dst.endswith(".output_norm.weight"):
            kind = "f32"
        elif ".conv." in dst and dst.endswith(".weight"):
            kind = "f16"
        else:
            kind = "bf16"
        out[dst] = (hf.pop(src).float().numpy(), kind)
    if hf:
        raise AssertionError(f"transformers' mapping left tensors unused: {sorted(hf)[:3]}")
    return out


def bf16_bytes(a):
    """Round to nearest even, as gguf-py's BF16 quantiser and torch do."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    return u.tobytes()


def compare_layout(gguf_path, p, sd):
    from gguf import GGUFReader  # noqa: PLC0415
    want = transcribe_cpp_tensors(p, sd)
    reader = GGUFReader(gguf_path)
    got = {t.name: t for t in reader.tensors}
    extra = sorted(set(got) - set(want) - {"frontend.mel_filterbank", "frontend.window", "dec.time_embed.inv_freq"})
    missing = sorted(set(want) - set(got))
    if extra or missing:
        raise AssertionError(f"layout differs: extra {extra[:3]}, missing {missing[:3]}")
    types = {"f32": 0, "f16": 1, "bf16": 30}
    for name, (a, kind) in want.items():
        t = got[name]
        if int(t.tensor_type) != types[kind]:
            raise AssertionError(f"{name}: type {t.tensor_type.name}, transcribe.cpp writes {kind}")
        if list(reversed([int(x) for x in t.shape])) != list(a.shape):
            raise AssertionError(f"{name}: shape {list(t.shape)} vs {list(a.shape)}")
        raw = bytes(t.data.tobytes())
        ref = bf16_bytes(a) if kind == "bf16" else a.astype(np.float16 if kind == "f16" else np.float32).tobytes()
        if raw != ref:
            raise AssertionError(f"{name}: bytes differ from transcribe.cpp's route")
    return len(want)


# ---------------------------------------------------------------------------
# The model, from Mistral's checkpoint.
# ---------------------------------------------------------------------------

def slaney_mel(n_mels, n_fft, sr):
    """transformers' mel_filter_bank(norm='slaney', mel_scale='slaney'), 0 to 8 kHz."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        m = 3.0 * f / 200.0
        log = f >= 1000.0
        return np.where(log, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) * (27.0 / np.log(6.4)), m)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        f = 200.0 * m / 3.0
        return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), f)

    fft_freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel_pts = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(8000.0), n_mels + 2))
    diff = np.diff(mel_pts)
    slopes = mel_pts[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    fb = np.maximum(0, np.minimum(down, up))
    fb *= 2.0 / (mel_pts[2:n_mels + 2] - mel_pts[:n_mels])
    return torch.tensor(fb, dtype=torch.float32)  # [n_freq, n_mels]


class Voxtral:
    def __init__(self, p, sd, delay):
        self.p, self.t, self.delay = p, {k: v.float() for k, v in sd.items()}, delay
        self.e = p["multimodal"]["whisper_model_args"]["encoder_args"]
        self.fb = slaney_mel(128, 400, 16000)
        half = p["dim"] // 2
        inv = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        t_cond = torch.cat([torch.cos(delay * inv), torch.sin(delay * inv)])
        self.ada = []
        for i in range(p["n_layers"]):
            s = f"layers.{i}.ada_rms_norm_t_cond."
            h = F.gelu(self.t[s + "0.weight"] @ t_cond)
            self.ada.append(1.0 + self.t[s + "2.weight"] @ h)

    # mistral-common's padding, then VoxtralRealtimeFeatureExtractor (center=True, fixed max).
    def log_mel(self, audio):
        x = torch.tensor(audio, dtype=torch.float32)
        left = 32 * 1280
        right = (1280 - len(audio) % 1280) % 1280 + (self.delay + 1 + 10) * 1280
        x = F.pad(x, (left, right))
        stft = torch.stft(x, 400, 160, window=torch.hann_window(400), center=True, pad_mode="reflect",
                          return_complex=True)
        mag = stft[..., :-1].abs() ** 2
        log = torch.clamp(self.fb.T @ mag, min=1e-10).log10()
        log = torch.maximum(log, torch.tensor(1.5 - 8.0))
        return (log + 4.0) / 4.0  # [n_mels, frames]

    @staticmethod
    def rms(x, w, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    @staticmethod
    def rope_interleaved(x, pos, theta):
        """Mistral's rotary embedding: pairs (2i, 2i+1) rotated by pos * theta^(-2i/d). x [T, H, d]."""
        d = x.shape[-1]
        freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        ang = pos[:, None].float() * freqs[None, :]
        cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    def attention(self, q, k, v, q_pos, k_pos, window):
        """q [Tq, H, d], k/v [Tk, Hk, d]: causal sliding window (q - window < k <= q), GQA."""
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
        delta = q_pos[:, None] - k_pos[None, :]
        allowed = (delta >= 0) & (delta < window)
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        return torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).reshape(q.shape[0], -1)

    def encode(self, mel):
        t, e = self.t, self.e
        x = F.gelu(F.conv1d(F.pad(mel[None], (2, 0)), t[ENC + "conv_layers.0.conv.weight"],
                            t[ENC + "conv_layers.0.conv.bias"]))
        x = F.gelu(F.conv1d(F.pad(x, (1, 0)), t[ENC + "conv_layers.1.conv.weight"], t[ENC + "conv_layers.1.conv.bias"],
                            stride=2))
        x = x[0].T  # [T, d]
        T, H, hd = x.shape[0], e["n_heads"], e["head_dim"]
        pos = torch.arange(T)
        for i in range(e["n_layers"]):
            s = f"{ENC}transformer.layers.{i}."
            h = self.rms(x, t[s + "attention_norm.weight"], e["norm_eps"])
            q = (h @ t[s + "attention.wq.weight"].T + t[s + "attention.wq.bias"]).view(T, H, hd)
            k = (h @ t[s + "attention.wk.weight"].T).view(T, H, hd)
            v = (h @ t[s + "attention.wv.weight"].T + t[s + "attention.wv.bias"]).view(T, H, hd)
            q, k = self.rope_interleaved(q, pos, e["rope_theta"]), self.rope_interleaved(k, pos, e["rope_theta"])
            a = self.attention(q, k, v, pos, pos, e["sliding_window"])
            x = x + a @ t[s + "attention.wo.weight"].T + t[s + "attention.wo.bias"]
            h = self.rms(x, t[s + "ffn_norm.weight"], e["norm_eps"])
            x = x + (F.silu(h @ t[s + "feed_forward.w1.weight"].T) * (h @ t[s + "feed_forward.w3.weight"].T)) @ \
                t[s + "feed_forward.w2.weight"].T + t[s + "feed_forward.w2.bias"]
        x = self.rms(x, t[ENC + "transformer.norm.weight"], e["norm_eps"])
        x = x.reshape(T // 4, -1)
        x = F.gelu(x @ t[EMB + "audio_language_projection.0.weight"].T)
        return x @ t[EMB + "audio_language_projection.2.weight"].T  # [slots, d]

    def decode(self, audio):
        """Greedy offline decoding (mistral-common's prompt; one position per slot): logits per position."""
        t, p = self.t, self.p
        emb = t[EMB + "tok_embeddings.weight"]
        H, Hk, hd = p["n_heads"], p["n_kv_heads"], p["head_dim"]
        n_prompt = 1 + 32 + self.delay
        cache = [([], []) for _ in range(p["n_layers"])]
        logits_out, tokens = [], []

        def forward(ids, pos0):
            T = len(ids)
            pos = torch.arange(pos0, pos0 + T)
            x = emb[torch.tensor(ids)] + audio[pos0:pos0 + T]
            for i in range(p["n_layers"]):
                s = f"layers.{i}."
                h = self.rms(x, t[s + "attention_norm.weight"], p["norm_eps"])
                q = self.rope_interleaved((h @ t[s + "attention.wq.weight"].T).view(T, H, hd), pos, p["rope_theta"])
                k = self.rope_interleaved((h @ t[s + "attention.wk.weight"].T).view(T, Hk, hd), pos, p["rope_theta"])
                v = (h @ t[s + "attention.wv.weight"].T).view(T, Hk, hd)
                cache[i][0].append(k)
                cache[i][1].append(v)
                K, V = torch.cat(cache[i][0]), torch.cat(cache[i][1])
                a = self.attention(q, K, V, pos, torch.arange(K.shape[0]), p["sliding_window"])
                x = x + a @ t[s + "attention.wo.weight"].T
                h = self.rms(x, t[s + "ffn_norm.weight"], p["norm_eps"]) * self.ada[i]
                x = x + (F.silu(h @ t[s + "feed_forward.w1.weight"].T) * (h @ t[s + "feed_forward.w3.weight"].T)) @ \
                    t[s + "feed_forward.w2.weight"].T
            return self.rms(x[-1], t["norm.weight"], p["norm_eps"]) @ emb.T

        logits = forward([1] + [32] * (n_prompt - 1), 0)
        for pos in range(n_prompt - 1, audio.shape[0]):
            if pos >= n_prompt:
                logits = forward([tokens[-1]], pos)
            logits_out.append(logits)
            tokens.append(int(torch.argmax(logits)))
            if tokens[-1] == 2:
                break
        return torch.stack(logits_out), tokens


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def run_earshot(tool, gguf, audio_path, out, chunk, logits=True, encoder_slots=16):
    cmd = [tool, "--model", gguf, "--audio", audio_path, "--raw", "1", "--out", out, "--chunk", str(chunk),
           "--kv", "f32", "--threads", "1", "--logits", "1" if logits else "0",
           "--max-encoder-slots", str(encoder_slots)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed: {r.stderr}")
    rows = [tuple(map(int, line.split())) for line in open(out + ".tokens.txt")]
    lg = np.fromfile(out + ".logits.f32", dtype=np.float32) if logits else None
    return rows, lg, np.fromfile(out + ".audio.f32", dtype=np.float32), r.stdout


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    if keep:
        os.makedirs(keep, exist_ok=True)
        return compare(argv[1], argv[2], keep)
    # Without --keep the files live only as long as the run.
    with tempfile.TemporaryDirectory(prefix="voxtral-ref-") as work:
        return compare(argv[1], argv[2], work)


def compare(tool, wav, work):
    vocab, seed = 1300, 7
    p = small_params(vocab)
    sd = random_state(p, seed, pad_scale=PAD_SCALE)
    ck = os.path.join(work, "checkpoint")
    os.makedirs(ck, exist_ok=True)
    with open(os.path.join(ck, "params.json"), "w") as f:
        json.dump(p, f)
    with open(os.path.join(ck, "tekken.json"), "w") as f:
        json.dump(tekken(vocab, seed), f)

    failures = []
    # The layout: transcribe.cpp's route of the BF16 checkpoint equals the converter's BF16 output.
    write_safetensors(os.path.join(ck, "consolidated.safetensors"), sd, "BF16")
    bf16_gguf = os.path.join(work, "voxtral-bf16.gguf")
    voxtral_gguf.convert(ck, bf16_gguf, "bf16")
    sd_bf16 = {k: v.to(torch.bfloat16).float() for k, v in sd.items()}
    n = compare_layout(bf16_gguf, p, sd_bf16)
    print(f"layout: {n} tensors equal to transcribe.cpp's route (names, shapes, types, bytes)")

    # The numbers: an F32 checkpoint, its F32 GGUF, earshot against the reference.
    write_safetensors(os.path.join(ck, "consolidated.safetensors"), sd, "F32")
    gguf = os.path.join(work, "voxtral-f32.gguf")
    voxtral_gguf.convert(ck, gguf, "f32")
    audio = read_wav(wav)[:SECONDS * 16000]
    raw = os.path.join(work, "audio.f32")
    audio.tofile(raw)
    model = Voxtral(p, sd, delay=6)
    with torch.no_grad():
        mel = model.log_mel(audio)
        ref_audio = model.encode(mel)
        ref_logits, ref_tokens = model.decode(ref_audio)
    rows, logits, emb, text = run_earshot(tool, gguf, raw, os.path.join(work, "offline"), 0, encoder_slots=1)
    d, V = p["dim"], vocab
    emb = emb.reshape(-1, d)
    if emb.shape[0] != ref_audio.shape[0]:
        failures.append(f"earshot encoded {emb.shape[0]} slots, the reference {ref_audio.shape[0]}")
    else:
        da = np.abs(emb - ref_audio.numpy()).max() / max(1.0, np.abs(ref_audio.numpy()).max())
        print(f"audio embeddings: {emb.shape[0]} slots, max |diff| / max |ref| = {da:.2e}")
        if da > 1e-4:
            failures.append(f"audio embeddings differ by {da:.2e} (tolerance 1e-4)")
    tokens = [tok for _, tok in rows]
    logits = logits.reshape(-1, V)
    n_cmp = min(len(tokens), len(ref_tokens))
    dl = np.abs(logits[:n_cmp] - ref_logits[:n_cmp].numpy()).max()
    scale = np.abs(ref_logits.numpy()).max()
    print(f"logits: {n_cmp} positions, max |diff| = {dl:.2e} (logits up to {scale:.1f})")
    if dl > 1e-3 * max(1.0, scale):
        failures.append(f"logits differ by {dl:.2e} (tolerance {1e-3 * max(1.0, scale):.2e})")
    if tokens[:len(ref_tokens)] != ref_tokens:
        first = next(i for i, (a, b) in enumerate(zip(tokens, ref_tokens)) if a != b)
        failures.append(f"tokens differ from position {rows[first][0]}: {tokens[first]} vs {ref_tokens[first]}")
    texts = sum(1 for tok in ref_tokens if tok >= N_SPECIAL)
    print(f"tokens: {len(ref_tokens)} identical, {texts} of them text; text: {text.strip()!r}")
    if texts < 10 or len(set(ref_tokens)) < 3:
        failures.append(f"only {texts} text tokens, {len(set(ref_tokens))} distinct: the comparison compares too little")

    # Streamed: pushed in pieces. An encoder graph's floats depend on how many
    # slots it takes (the products' blocking), so a stream equals the offline run
    # bit for bit where both encode one slot per graph (the run above); with up to
    # 16 slots a graph (the default, however the pushes fall) the tokens are
    # identical and the logits within the tolerance above of the reference's.
    srows, slogits, semb, _ = run_earshot(tool, gguf, raw, os.path.join(work, "chunk1000"), 1000, encoder_slots=1)
    same = srows == rows and np.array_equal(slogits, logits.reshape(-1)) and np.array_equal(semb, emb.reshape(-1))
    print(f"streamed in 1000-sample pieces, one slot per encoder graph: {'identical' if same else 'DIFFERENT'}")
    if not same:
        failures.append("the 1000-sample stream differs from the offline run (one slot per encoder graph)")
    srows, slogits, semb, _ = run_earshot(tool, gguf, raw, os.path.join(work, "chunk3217"), 3217)
    slogits = slogits.reshape(-1, V)
    dl = np.abs(slogits[:n_cmp] - ref_logits[:n_cmp].numpy()).max() if slogits.shape == logits.shape else float("inf")
    print(f"streamed in 3217-sample pieces, up to 16 slots per encoder graph: tokens "
          f"{'identical' if srows == rows else 'DIFFERENT'}, logits max |diff| to the reference = {dl:.2e}")
    if srows != rows or dl > 1e-3 * max(1.0, scale):
        failures.append("the 3217-sample stream differs from the reference beyond tolerance")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

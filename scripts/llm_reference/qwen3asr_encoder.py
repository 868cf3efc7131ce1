"""An independent numpy Qwen3-ASR audio encoder (the "AuT" tower as published in
Qwen/Qwen3-ASR's modeling_qwen3_asr.py and model-families.md), reading an mmproj
GGUF (projector qwen3a) with llama.cpp's gguf-py, in float64:

  Whisper log-mel (WhisperFeatureExtractor: reflect-padded STFT, periodic Hann 400,
  hop 160, Slaney mel filters, log10, clamp to max - 8, (x + 4) / 4; the last STFT
  frame dropped) -> chunks of 100 frames (the last one zero-padded for the convs)
  -> 3 x Conv2d 3x3 stride 2 pad 1 + GELU -> linear (conv_out) -> sinusoidal
  positions restarting per chunk -> the valid tokens of each chunk -> pre-LN
  transformer layers with attention inside windows of 104 tokens -> ln_post ->
  proj1 + GELU -> proj2.

Written from the published definitions, not from libmtmd's graph. mtmd_frames=True
reproduces libmtmd's known deviation instead (model-families.md): one more mel
frame (n // 160 + 1), and every 800-frame window zero-padded to whole 100-frame
chunks whose padding tokens take part in the window's attention.
"""
import math

import numpy as np
from gguf import GGUFReader

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
CHUNK = 100          # mel frames per conv chunk (n_window * 2)
WINDOW_FRAMES = 800  # mel frames per attention window (n_window_infer)


def erf_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def slaney_mel_filters(n_mels, n_fft=N_FFT, sr=SAMPLE_RATE):
    """librosa.filters.mel(sr, n_fft, n_mels) with htk=False, norm='slaney' (Whisper's)."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        mel = f / (200.0 / 3)
        log_region = f >= 1000.0
        return np.where(log_region, 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / (np.log(6.4) / 27.0), mel)

    def mel_to_hz(m):
        m = np.asarray(m, dtype=np.float64)
        f = m * (200.0 / 3)
        return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), f)

    fft_freqs = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_pts = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2))
    fdiff = np.diff(mel_pts)
    ramps = mel_pts[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_pts[2:n_mels + 2] - mel_pts[:n_mels]))[:, None]


def log_mel(pcm, n_mels, mtmd_frames=False):
    """(n_mels, n_frames): n_frames = len // 160 (the reference drops the STFT's last frame), +1 with mtmd_frames."""
    x = np.asarray(pcm, dtype=np.float64)
    padded = np.pad(x, N_FFT // 2, mode="reflect")
    n_stft = 1 + (len(padded) - N_FFT) // HOP
    window = 0.5 * (1.0 - np.cos(2.0 * np.pi * np.arange(N_FFT) / N_FFT))  # periodic
    frames = np.stack([padded[i * HOP:i * HOP + N_FFT] * window for i in range(n_stft)])
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    mel = slaney_mel_filters(n_mels) @ power.T
    spec = np.log10(np.maximum(mel, 1e-10))
    n_frames = min(n_stft, len(x) // HOP + 1) if mtmd_frames else n_stft - 1
    spec = spec[:, :n_frames]
    spec = np.maximum(spec, spec.max() - 8.0)
    return (spec + 4.0) / 4.0


def tokens_after_convs(n_frames):
    n = n_frames
    for _ in range(3):
        n = (n - 1) // 2 + 1
    return n


def sinusoids(length, channels):
    """SinusoidsPositionEmbedding: sin half then cos half, timescales up to 10000."""
    inc = np.log(10000.0) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1)


class AudioEncoder:
    def __init__(self, path):
        reader = GGUFReader(path)
        fields = reader.fields

        def value(key):
            return fields[key].contents()

        if value("clip.audio.projector_type") != "qwen3a":
            raise ValueError(f"{path}: projector {value('clip.audio.projector_type')!r}, not qwen3a")
        self.n_layer = int(value("clip.audio.block_count"))
        self.n_head = int(value("clip.audio.attention.head_count"))
        self.n_mel = int(value("clip.audio.num_mel_bins"))
        self.eps = float(value("clip.audio.attention.layer_norm_epsilon"))
        self.w = {}
        for t in reader.tensors:
            if t.tensor_type not in (0, 1):  # F32, F16
                raise ValueError(f"{path}: tensor {t.name} is neither F32 nor F16")
            self.w[t.name] = np.asarray(t.data, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)])
        self.d_model = self.w["a.blk.0.attn_q.weight"].shape[0]

    @staticmethod
    def conv(x, weight, bias):
        """Conv2d 3x3, stride 2, pad 1: x (N, C, H, W), weight (O, C, 3, 3) -> (N, O, H', W')."""
        n, c, h, w = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        ho, wo = (h - 1) // 2 + 1, (w - 1) // 2 + 1
        cols = np.empty((n, c, 3, 3, ho, wo))
        for i in range(3):
            for j in range(3):
                cols[:, :, i, j] = xp[:, :, i:i + 2 * ho:2, j:j + 2 * wo:2]
        # A matrix product over (c, i, j) (BLAS): einsum's own loops take minutes at 480 channels.
        out = np.tensordot(cols, weight, axes=([1, 2, 3], [1, 2, 3])).transpose(0, 3, 1, 2)
        return out + bias.reshape(1, -1, 1, 1)

    def layer_norm(self, x, name):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        return y + self.w[name + ".bias"] if name + ".bias" in self.w else y

    def attention(self, x, b):
        n, d = x.shape
        hd = d // self.n_head
        q = self.linear(x, b + "attn_q").reshape(n, self.n_head, hd)
        k = self.linear(x, b + "attn_k").reshape(n, self.n_head, hd)
        v = self.linear(x, b + "attn_v").reshape(n, self.n_head, hd)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        return self.linear(np.einsum("hts,shd->thd", p, v).reshape(n, d), b + "attn_out")

    def encode_window(self, mel, n_valid_frames):
        """One attention window: mel (n_mel, frames); returns the tokens of its first n_valid_frames."""
        w = self.w
        n_frames = mel.shape[1]
        n_chunks = -(-n_frames // CHUNK)
        chunks = np.zeros((n_chunks, 1, self.n_mel, CHUNK))
        lengths = []
        for c in range(n_chunks):
            part = mel[:, c * CHUNK:(c + 1) * CHUNK]
            chunks[c, 0, :, :part.shape[1]] = part
            lengths.append(max(0, min(CHUNK, n_valid_frames - c * CHUNK)))
        x = chunks
        for i in (1, 2, 3):
            x = erf_gelu(self.conv(x, w[f"a.conv2d.{i}.weight"], w[f"a.conv2d.{i}.bias"].reshape(-1)))
        nc, ch, f, t = x.shape
        x = x.transpose(0, 3, 1, 2).reshape(nc, t, ch * f)  # feature index c * F + f
        x = x @ w["a.conv_out.weight"].T
        x = x + sinusoids(t, self.d_model)[None, :, :]
        x = np.concatenate([x[c, :tokens_after_convs(lengths[c])] for c in range(nc) if lengths[c] > 0])
        for l in range(self.n_layer):
            b = f"a.blk.{l}."
            x = x + self.attention(self.layer_norm(x, b + "ln1"), b)
            h = self.layer_norm(x, b + "ln2")
            x = x + self.linear(erf_gelu(self.linear(h, b + "ffn_up")), b + "ffn_down")
        x = self.layer_norm(x, "a.post_ln")
        return self.linear(erf_gelu(self.linear(x, "mm.a.mlp.1")), "mm.a.mlp.2")

    def encode(self, pcm, mtmd_frames=False):
        """Audio embeddings (n_tokens, projection_dim) of 16 kHz mono audio."""
        mel = log_mel(pcm, self.n_mel, mtmd_frames)
        n = mel.shape[1]
        out = []
        for off in range(0, n, WINDOW_FRAMES):
            part = mel[:, off:off + WINDOW_FRAMES]
            valid = part.shape[1]
            if mtmd_frames:  # libmtmd: the window's padding frames count as audio in attention
                valid = -(-valid // CHUNK) * CHUNK
            out.append(self.encode_window(part, valid))
        return np.concatenate(out)

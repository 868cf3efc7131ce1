"""An independent numpy decoder for the GGUF architectures earshot translates with
(hunyuan-dense, qwen3) and Qwen3-ASR's text model (qwen3vl): RMSNorm, NEOX RoPE,
per-head Q/K RMSNorm (hunyuan: after RoPE; qwen3: before), grouped-query
attention, SwiGLU, tied output head. qwen3vl is Qwen3 with M-RoPE; earshot gives
every section the sequence position, where M-RoPE is NEOX RoPE (the rotated
pairs and frequencies are the same, only the position source of each pair
differs), so it runs as qwen3.

Written from the architectures' definitions, not from llama.cpp's graph code; it
reads the GGUF with llama.cpp's gguf-py (PYTHONPATH=third_party/src/llama.cpp/gguf-py)
and computes in float64. F32 weights only: the oracle for random-weight models.
"""
import numpy as np
from gguf import GGUFReader


class Decoder:
    def __init__(self, path):
        reader = GGUFReader(path)
        fields = reader.fields

        def value(key):
            f = fields[key]
            return f.contents()

        self.arch = value("general.architecture")
        if self.arch not in ("hunyuan-dense", "qwen3", "qwen3vl"):
            raise ValueError(f"{path}: architecture {self.arch!r} (the reference runs hunyuan-dense, qwen3, qwen3vl)")
        if self.arch == "qwen3vl" and int(value("qwen3vl.n_deepstack_layers")) != 0:
            raise ValueError(f"{path}: deepstack layers (Qwen3-VL's vision path) are not part of Qwen3-ASR")
        p = self.arch + "."
        self.n_layer = int(value(p + "block_count"))
        self.n_head = int(value(p + "attention.head_count"))
        self.n_head_kv = int(value(p + "attention.head_count_kv"))
        self.eps = float(value(p + "attention.layer_norm_rms_epsilon"))
        self.rope_base = float(value(p + "rope.freq_base"))
        self.weights = {}
        for t in reader.tensors:
            if t.tensor_type != 0:  # GGML_TYPE_F32
                raise ValueError(f"{path}: tensor {t.name} is not F32 (the reference reads F32 weights only)")
            # gguf-py gives numpy's row-major shape: ggml's ne reversed, so a
            # matrix [in, out] in ggml is (out, in) here and y = W @ x.
            self.weights[t.name] = np.asarray(t.data, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)])
        self.head_dim = self.weights["blk.0.attn_q_norm.weight"].shape[0]

    def rms_norm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, positions):
        # NEOX: dimension i rotates with i + d/2, angle pos * base^(-2i/d).
        d = x.shape[-1]
        half = d // 2
        inv_freq = self.rope_base ** (-np.arange(half, dtype=np.float64) * 2.0 / d)
        angle = positions[:, None] * inv_freq[None, :]  # (n, half)
        cos = np.cos(angle)[:, None, :]
        sin = np.sin(angle)[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def forward(self, tokens):
        """Logits of every token and the attention probabilities of every layer,
        (n_layer, n_head, n_tokens, n_tokens), of the sequence at positions 0..n-1."""
        hidden, attentions = self.forward_embeddings(self.weights["token_embd.weight"][np.asarray(tokens)])
        return self.logits(hidden), attentions

    def logits(self, hidden):
        head = self.weights.get("output.weight", self.weights["token_embd.weight"])  # tied when absent
        return hidden @ head.T

    def forward_embeddings(self, x):
        """forward() from input embeddings (n, n_embd) (token rows, or an audio
        encoder's outputs in their place): the final-normed hidden states and the attentions."""
        w = self.weights
        n = x.shape[0]
        hd, nh, nkv = self.head_dim, self.n_head, self.n_head_kv
        positions = np.arange(n, dtype=np.float64)
        mask = np.triu(np.full((n, n), -np.inf), k=1)
        attentions = []
        for l in range(self.n_layer):
            b = f"blk.{l}."
            h = self.rms_norm(x, w[b + "attn_norm.weight"])
            q = (h @ w[b + "attn_q.weight"].T).reshape(n, nh, hd)
            k = (h @ w[b + "attn_k.weight"].T).reshape(n, nkv, hd)
            v = (h @ w[b + "attn_v.weight"].T).reshape(n, nkv, hd)
            if self.arch == "hunyuan-dense":
                q = self.rms_norm(self.rope(q, positions), w[b + "attn_q_norm.weight"])
                k = self.rms_norm(self.rope(k, positions), w[b + "attn_k_norm.weight"])
            else:
                q = self.rope(self.rms_norm(q, w[b + "attn_q_norm.weight"]), positions)
                k = self.rope(self.rms_norm(k, w[b + "attn_k_norm.weight"]), positions)
            group = nh // nkv  # query head j reads KV head j // group
            kh = np.repeat(k, group, axis=1)
            vh = np.repeat(v, group, axis=1)
            scores = np.einsum("thd,shd->hts", q, kh) / np.sqrt(hd) + mask
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attentions.append(probs)
            out = np.einsum("hts,shd->thd", probs, vh).reshape(n, nh * hd)
            x = x + out @ w[b + "attn_output.weight"].T
            h = self.rms_norm(x, w[b + "ffn_norm.weight"])
            gate = h @ w[b + "ffn_gate.weight"].T
            up = h @ w[b + "ffn_up.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[b + "ffn_down.weight"].T
        return self.rms_norm(x, w["output_norm.weight"]), np.stack(attentions)

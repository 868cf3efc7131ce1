"""Random-weight Sortformer diarizer checkpoints (.nemo) laid out as NeMo writes a
SortformerEncLabelModel: model_config.yaml (the keys of NeMo's
streaming_sortformer_diarizer_4spk-v2.yaml) and model_weights.ckpt (a torch state
dict under NeMo's module names and PyTorch's shapes: encoder.* ConformerEncoder with
use_bias, transformer_encoder.layers.N.* TransformerEncoderBlock,
sortformer_modules.*, preprocessor.featurizer.fb/window). No tokenizer.

The weights are scaled so the outputs are not degenerate: linears ~ 1/sqrt(fan_in),
LayerNorm gains near 1, BatchNorm statistics near (0, 1), each residual branch's
output projection (the Conformer's feed-forward, attention and conv outputs, the
Transformer's attention and feed-forward outputs) scaled down at the real depth as a
trained model's are (at full scale the attention's average over the frames, added
layer after layer, makes every frame alike: 17 + 18 layers left the Transformer's
output varying by ~1e-5 of its size from frame to frame), and a head whose speakers
share a component, so frames range from all-silent to overlapped speech (the speaker
cache's silence profile, its disabled and boosted scores all take part).
earshot's C++ generator (src/model/sortformer/random_model.cpp) scales the same
projections by the same factor.

  python3 sortformer_nemo.py OUT.nemo [--real] [--seed N]
"""
import argparse
import io
import math
import os
import sys
import tarfile

import numpy as np
import torch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "convert"))
import fastconformer_gguf as fg  # noqa: E402

# Small dimensions for the fast tests; --real gives diar_streaming_sortformer_4spk-v2's.
# residual: the residual branches' output projections' scale (two layers keep their frames apart unscaled).
SMALL = dict(n_mels=32, d=64, n_layers=2, heads=4, channels=16, kernel=9, tf_d=32, tf_layers=2, tf_heads=4,
             tf_inner=64, residual=1.0)
REAL = dict(n_mels=128, d=512, n_layers=17, heads=8, channels=256, kernel=9, tf_d=192, tf_layers=18, tf_heads=8,
            tf_inner=768, residual=0.2)


def config(dims, cache=None):
    sm = {"_target_": "nemo.collections.asr.modules.sortformer_modules.SortformerModules", "num_spks": 4,
          "dropout_rate": 0.5, "fc_d_model": dims["d"], "tf_d_model": dims["tf_d"], "spkcache_len": 188,
          "fifo_len": 0, "chunk_len": 188, "spkcache_update_period": 188, "chunk_left_context": 1,
          "chunk_right_context": 1, "spkcache_sil_frames_per_spk": 3, "scores_add_rnd": 0,
          "pred_score_threshold": 0.25, "max_index": 99999, "scores_boost_latest": 0.05, "sil_threshold": 0.2,
          "strong_boost_rate": 0.75, "weak_boost_rate": 1.5, "min_pos_scores_rate": 0.5, "causal_attn_rate": 0.5,
          "causal_attn_rc": 7}
    sm.update(cache or {})
    return {
        "target": "nemo.collections.asr.models.sortformer_diar_models.SortformerEncLabelModel",
        "sample_rate": 16000, "pil_weight": 0.5, "ats_weight": 0.5, "max_num_of_spks": 4, "streaming_mode": True,
        "model_defaults": {"fc_d_model": dims["d"], "tf_d_model": dims["tf_d"]},
        "preprocessor": {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
                         "normalize": "NA", "window_size": 0.025, "sample_rate": 16000, "window_stride": 0.01,
                         "window": "hann", "features": dims["n_mels"], "n_fft": 512, "frame_splicing": 1,
                         "dither": 1e-05},
        "sortformer_modules": sm,
        "encoder": {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": dims["n_mels"],
                    "feat_out": -1, "n_layers": dims["n_layers"], "d_model": dims["d"], "subsampling": "dw_striding",
                    "subsampling_factor": 8, "subsampling_conv_channels": dims["channels"],
                    "causal_downsampling": False, "ff_expansion_factor": 4, "self_attention_model": "rel_pos",
                    "n_heads": dims["heads"], "att_context_size": [-1, -1], "att_context_style": "regular",
                    "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000,
                    "conv_kernel_size": dims["kernel"], "conv_norm_type": "batch_norm", "conv_context_size": None,
                    "dropout": 0.1, "dropout_pre_encoder": 0.1, "dropout_emb": 0.0, "dropout_att": 0.1},
        "transformer_encoder": {"_target_": "nemo.collections.asr.modules.transformer.transformer_encoders."
                                "TransformerEncoder", "num_layers": dims["tf_layers"], "hidden_size": dims["tf_d"],
                                "inner_size": dims["tf_inner"], "num_attention_heads": dims["tf_heads"],
                                "attn_score_dropout": 0.5, "attn_layer_dropout": 0.5, "ffn_dropout": 0.5,
                                "hidden_act": "relu", "pre_ln": False, "pre_ln_final_layer_norm": True},
        "loss": {"_target_": "nemo.collections.asr.losses.bce_loss.BCELoss", "weight": None, "reduction": "mean"},
    }


def state_dict(dims, seed):
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g) * scale

    def linear(sd, name, n_out, n_in, bias=True, gain=1.0):
        sd[name + ".weight"] = randn(n_out, n_in, scale=gain / math.sqrt(n_in))
        if bias:
            sd[name + ".bias"] = randn(n_out, scale=0.1 * gain)

    def norm(sd, name, n):
        sd[name + ".weight"] = 1.0 + randn(n, scale=0.1)
        sd[name + ".bias"] = randn(n, scale=0.1)

    sd = {}
    n_mels, d, c, H, K = dims["n_mels"], dims["d"], dims["channels"], dims["heads"], dims["kernel"]
    res = dims["residual"]
    sd["preprocessor.featurizer.window"] = torch.from_numpy(fg.window_values("hann", 400))
    sd["preprocessor.featurizer.fb"] = torch.from_numpy(fg.slaney_filters(n_mels, 512, 16000))[None]
    pre = "encoder.pre_encode."
    sd[pre + "conv.0.weight"] = randn(c, 1, 3, 3, scale=1 / 3)
    sd[pre + "conv.0.bias"] = randn(c, scale=0.1)
    for dw, pw in (("2", "3"), ("5", "6")):
        sd[pre + f"conv.{dw}.weight"] = randn(c, 1, 3, 3, scale=1 / 3)
        sd[pre + f"conv.{dw}.bias"] = randn(c, scale=0.1)
        sd[pre + f"conv.{pw}.weight"] = randn(c, c, 1, 1, scale=1 / math.sqrt(c))
        sd[pre + f"conv.{pw}.bias"] = randn(c, scale=0.1)
    linear(sd, pre + "out", d, c * (n_mels // 8))
    for i in range(dims["n_layers"]):
        p = f"encoder.layers.{i}."
        for n in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            norm(sd, p + n, d)
        for ff in ("feed_forward1", "feed_forward2"):
            linear(sd, p + ff + ".linear1", 4 * d, d)
            linear(sd, p + ff + ".linear2", d, 4 * d, gain=res)
        for m in ("linear_q", "linear_k", "linear_v", "linear_out"):
            linear(sd, p + "self_attn." + m, d, d, gain=res if m == "linear_out" else 1.0)
        linear(sd, p + "self_attn.linear_pos", d, d, bias=False)
        sd[p + "self_attn.pos_bias_u"] = randn(H, d // H, scale=0.1)
        sd[p + "self_attn.pos_bias_v"] = randn(H, d // H, scale=0.1)
        sd[p + "conv.pointwise_conv1.weight"] = randn(2 * d, d, 1, scale=1 / math.sqrt(d))
        sd[p + "conv.pointwise_conv1.bias"] = randn(2 * d, scale=0.1)
        sd[p + "conv.depthwise_conv.weight"] = randn(d, 1, K, scale=1 / math.sqrt(K))
        sd[p + "conv.depthwise_conv.bias"] = randn(d, scale=0.1)
        norm(sd, p + "conv.batch_norm", d)
        sd[p + "conv.batch_norm.running_mean"] = randn(d, scale=0.1)
        sd[p + "conv.batch_norm.running_var"] = 0.5 + torch.rand(d, generator=g)
        sd[p + "conv.batch_norm.num_batches_tracked"] = torch.tensor(1000, dtype=torch.int64)
        sd[p + "conv.pointwise_conv2.weight"] = randn(d, d, 1, scale=res / math.sqrt(d))
        sd[p + "conv.pointwise_conv2.bias"] = randn(d, scale=0.1 * res)
    tf = dims["tf_d"]
    linear(sd, "sortformer_modules.encoder_proj", tf, d)
    for i in range(dims["tf_layers"]):
        p = f"transformer_encoder.layers.{i}."
        for net in ("query_net", "key_net", "value_net", "out_projection"):
            linear(sd, p + "first_sub_layer." + net, tf, tf, gain=res if net == "out_projection" else 1.0)
        norm(sd, p + "layer_norm_1", tf)
        linear(sd, p + "second_sub_layer.dense_in", dims["tf_inner"], tf)
        linear(sd, p + "second_sub_layer.dense_out", tf, dims["tf_inner"], gain=res)
        norm(sd, p + "layer_norm_2", tf)
    linear(sd, "sortformer_modules.hidden_to_spks", 4, 2 * tf)
    linear(sd, "sortformer_modules.first_hidden_to_hidden", tf, tf)
    calibrate_head(dims, sd, seed)
    return sd


def calibrate_head(dims, sd, seed):
    """A random deep network's last hidden layer barely varies from frame to frame, so the head is set from its
    statistics on a structured random input: logit_k = 2.5 z_1 + 2 z_(k+2) + offset_k, z_i the hidden layer's
    standardised principal components (z_1 shared by all speakers: all four fall silent together at times)."""
    import sortformer_reference  # noqa: the reference's forward, up to the head

    tf = dims["tf_d"]
    ref = sortformer_reference.Sortformer(config(dims), sd)
    ref.t["sortformer_modules.single_hidden_to_spks.weight"] = torch.eye(tf)
    ref.t["sortformer_modules.single_hidden_to_spks.bias"] = torch.zeros(tf)
    ref.n_spk = tf
    rng = np.random.default_rng(seed)
    with torch.no_grad():  # the head's input over several inputs' voices, [T, tf]
        h = torch.cat([torch.logit(ref.offline(torch.from_numpy(sortformer_reference.structured_mel(
            rng, 800, dims["n_mels"]))).double().clamp(1e-12, 1 - 1e-12)) for _ in range(6)])
    mean = h.mean(dim=0)
    _, s, vt = torch.linalg.svd(h - mean, full_matrices=False)
    std = s / math.sqrt(h.shape[0] - 1)
    z = [vt[i] / std[i] for i in range(6)]  # h . z[i] has unit variance over the frames
    w = torch.stack([2.5 * z[0] + 2.0 * z[k + 2] for k in range(4)])
    offsets = torch.tensor([0.3, -0.2, -0.6, -1.0], dtype=torch.float64)
    sd["sortformer_modules.single_hidden_to_spks.weight"] = w.float()
    sd["sortformer_modules.single_hidden_to_spks.bias"] = (offsets - w @ mean).float()


def write_nemo(path, cfg, sd):
    with tarfile.open(path, "w") as tar:
        def add(name, data):
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("model_config.yaml", yaml.safe_dump(cfg).encode())
        buf = io.BytesIO()
        torch.save(sd, buf)
        add("model_weights.ckpt", buf.getvalue())


# transcribe.cpp's layout (handy-computer/transcribe.cpp, scripts/convert-sortformer.py, as published): keys
# stt.frontend.* and stt.sortformer.*, its own tensor names, NeMo's shapes unchanged, all f32, no featuriser.
TC_BLOCK = (("norm_feed_forward1.", "norm_ff1."), ("feed_forward1.", "ff1."), ("norm_self_att.", "norm_attn."),
            ("self_attn.", "attn."), ("conv.pointwise_conv1.", "conv.pointwise1."),
            ("conv.depthwise_conv.", "conv.depthwise."), ("conv.batch_norm.", "conv.bn."),
            ("conv.pointwise_conv2.", "conv.pointwise2."), ("norm_feed_forward2.", "norm_ff2."),
            ("feed_forward2.", "ff2."), ("norm_conv.", "norm_conv."), ("norm_out.", "norm_out."))
TC_TRANSFORMER = (("layer_norm_1.", "norm_1."), ("first_sub_layer.query_net.", "attn.q."),
                  ("first_sub_layer.key_net.", "attn.k."), ("first_sub_layer.value_net.", "attn.v."),
                  ("first_sub_layer.out_projection.", "attn.out."), ("layer_norm_2.", "norm_2."),
                  ("second_sub_layer.dense_in.", "ff.in."), ("second_sub_layer.dense_out.", "ff.out."))
TC_HEAD = (("sortformer_modules.encoder_proj.", "diar.encoder_proj."), ("sortformer_modules.first_hidden_to_hidden.",
           "diar.fc1."), ("sortformer_modules.hidden_to_spks.", "diar.spk_head."),
           ("sortformer_modules.single_hidden_to_spks.", "diar.single_spk_head."))


def transcribe_cpp_name(name):
    if name.startswith("encoder.pre_encode."):
        return "enc." + name[len("encoder."):]
    if name.startswith("encoder.layers."):
        layer, rest = name[len("encoder.layers."):].split(".", 1)
        for ours, theirs in TC_BLOCK:
            if rest.startswith(ours):
                return f"enc.blocks.{layer}.{theirs}{rest[len(ours):]}"
    if name.startswith("transformer_encoder.layers."):
        layer, rest = name[len("transformer_encoder.layers."):].split(".", 1)
        for ours, theirs in TC_TRANSFORMER:
            if rest.startswith(ours):
                return f"tf.blocks.{layer}.{theirs}{rest[len(ours):]}"
    for ours, theirs in TC_HEAD:
        if name.startswith(ours):
            return theirs + name[len(ours):]
    return None


def write_transcribe_cpp_gguf(path, cfg, sd):
    sys.path.insert(0, os.path.join(ROOT, "third_party", "src", "llama.cpp", "gguf-py"))
    import gguf

    enc, tf, pre, sm = cfg["encoder"], cfg["transformer_encoder"], cfg["preprocessor"], cfg["sortformer_modules"]
    w = gguf.GGUFWriter(str(path), "sortformer")
    sr = int(pre["sample_rate"])
    w.add_uint32("stt.frontend.sample_rate", sr)
    w.add_uint32("stt.frontend.num_mels", int(pre["features"]))
    w.add_uint32("stt.frontend.n_fft", int(pre["n_fft"]))
    w.add_uint32("stt.frontend.hop_length", int(round(pre["window_stride"] * sr)))
    w.add_uint32("stt.frontend.win_length", int(round(pre["window_size"] * sr)))
    w.add_string("stt.frontend.window", pre["window"])
    w.add_string("stt.frontend.normalize", "none")
    w.add_float32("stt.frontend.pre_emphasis", 0.97)
    w.add_float32("stt.frontend.dither", float(pre["dither"]))
    w.add_bool("stt.capability.streaming", True)
    w.add_bool("stt.capability.speaker_diarization", True)
    u = {"max_speakers": cfg["max_num_of_spks"], "frame_hop": 160 * enc["subsampling_factor"],
         "encoder.n_layers": enc["n_layers"], "encoder.d_model": enc["d_model"], "encoder.n_heads": enc["n_heads"],
         "encoder.d_ff": enc["d_model"] * enc["ff_expansion_factor"], "encoder.conv_kernel": enc["conv_kernel_size"],
         "encoder.subsampling_factor": enc["subsampling_factor"],
         "encoder.subsampling_channels": enc["subsampling_conv_channels"], "encoder.feat_in": enc["feat_in"],
         "encoder.pos_emb_max_len": enc["pos_emb_max_len"], "transformer.n_layers": tf["num_layers"],
         "transformer.d_model": tf["hidden_size"], "transformer.n_heads": tf["num_attention_heads"],
         "transformer.d_ff": tf["inner_size"], "stream.chunk_len": sm["chunk_len"],
         "stream.spkcache_len": sm["spkcache_len"], "stream.fifo_len": sm["fifo_len"],
         "stream.spkcache_update_period": sm["spkcache_update_period"]}
    for k, v in u.items():
        w.add_uint32("stt.sortformer." + k, int(v))
    w.add_string("stt.sortformer.encoder.conv_norm_type", enc["conv_norm_type"])
    w.add_string("stt.sortformer.transformer.activation", tf["hidden_act"])
    w.add_bool("stt.sortformer.transformer.pre_ln", bool(tf["pre_ln"]))
    for name, t in sd.items():
        theirs = transcribe_cpp_name(name)
        if theirs is None or name.endswith("num_batches_tracked"):
            continue  # preprocessor.* and the BatchNorm counters, as its converter skips them
        w.add_tensor(theirs, np.ascontiguousarray(t.float().numpy()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_nemo(path):
    with tarfile.open(path) as tar:
        names = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()}
        cfg = yaml.safe_load(tar.extractfile(names["model_config.yaml"]).read())
        sd = torch.load(io.BytesIO(tar.extractfile(names["model_weights.ckpt"]).read()), map_location="cpu")
    return cfg, sd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--real", action="store_true", help="diar_streaming_sortformer_4spk-v2's dimensions")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    dims = REAL if args.real else SMALL
    write_nemo(args.out, config(dims), state_dict(dims, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())

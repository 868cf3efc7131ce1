"""NeMo Sortformer diarizer (SortformerEncLabelModel: diar_streaming_sortformer_4spk-v2 and its relatives) config +
state dict -> earshot's GGUF (docs/sortformer-gguf.md). The encoder keys and tensors are the FastConformer's
(fastconformer_gguf.py, with biases); the Transformer, projection and head keep NeMo's names. A config value this
module does not know is refused (ConvertError naming the key and the value).
"""
import numpy as np

import fastconformer_gguf as fg
from fastconformer_gguf import ConvertError, _get, _one_of

ARCH = "earshot-sortformer"

# SortformerModules' defaults (nemo/collections/asr/modules/sortformer_modules.py) for keys a config leaves out.
CACHE_DEFAULTS = {"spkcache_len": 188, "fifo_len": 0, "chunk_len": 188, "spkcache_update_period": 188,
                  "chunk_left_context": 1, "chunk_right_context": 1, "spkcache_sil_frames_per_spk": 3,
                  "pred_score_threshold": 0.25, "scores_boost_latest": 0.05, "sil_threshold": 0.2,
                  "strong_boost_rate": 0.75, "weak_boost_rate": 1.5, "min_pos_scores_rate": 0.5}
CACHE_KEYS = {"spkcache_len": "cache.spkcache_len", "fifo_len": "cache.fifo_len", "chunk_len": "cache.chunk_len",
              "spkcache_update_period": "cache.update_period", "chunk_left_context": "cache.chunk_left_context",
              "chunk_right_context": "cache.chunk_right_context",
              "spkcache_sil_frames_per_spk": "cache.sil_frames_per_spk",
              "pred_score_threshold": "cache.pred_score_threshold", "scores_boost_latest": "cache.scores_boost_latest",
              "sil_threshold": "cache.sil_threshold", "strong_boost_rate": "cache.strong_boost_rate",
              "weak_boost_rate": "cache.weak_boost_rate", "min_pos_scores_rate": "cache.min_pos_scores_rate"}
# GGUF tensor names hold at most 63 bytes: the Transformer's and head's get short ones.
TRANSFORMER_NAMES = (("attn_q", "first_sub_layer.query_net"), ("attn_k", "first_sub_layer.key_net"),
                     ("attn_v", "first_sub_layer.value_net"), ("attn_out", "first_sub_layer.out_projection"),
                     ("norm_1", "layer_norm_1"), ("ffn_in", "second_sub_layer.dense_in"),
                     ("ffn_out", "second_sub_layer.dense_out"), ("norm_2", "layer_norm_2"))
FLOAT_KEYS = ("pred_score_threshold", "scores_boost_latest", "sil_threshold", "strong_boost_rate", "weak_boost_rate",
              "min_pos_scores_rate")


def is_sortformer(cfg):
    target = str(cfg.get("target", "")) + str(cfg.get("_target_", ""))
    return "sortformer_modules" in cfg or "Sortformer" in target


def hparams_from_config(cfg):
    hp = fg.encoder_hparams(cfg, allow_bias=True)
    if hp["attention.context"] != [-1, -1]:
        raise ConvertError(f"config encoder.att_context_size = {hp['attention.context']!r} is not supported "
                           "(Sortformer's encoder attends to its whole window: [-1, -1])")
    fg.preprocessor_hparams(cfg, hp)
    if hp["features.normalize"] != "none":
        raise ConvertError("config preprocessor.normalize = 'per_feature' is not supported for a streaming "
                           "diarizer (NA)")
    tf = _get(cfg, "transformer_encoder")
    target = tf.get("_target_", "")
    if target and not target.endswith("TransformerEncoder"):
        raise ConvertError(f"config transformer_encoder._target_ = {target!r} is not supported (TransformerEncoder)")
    hp["transformer.block_count"] = int(_get(cfg, "transformer_encoder.num_layers"))
    hp["transformer.embedding_length"] = int(_get(cfg, "transformer_encoder.hidden_size"))
    hp["transformer.head_count"] = int(_get(cfg, "transformer_encoder.num_attention_heads", 1))
    hp["transformer.feed_forward_length"] = int(_get(cfg, "transformer_encoder.inner_size"))
    hp["transformer.activation"] = _one_of(cfg, "transformer_encoder.hidden_act", ["relu"], "relu")
    hp["transformer.pre_ln"] = bool(_one_of(cfg, "transformer_encoder.pre_ln", [False], False))
    hp["transformer.layer_norm_epsilon"] = 1e-5  # TransformerEncoderBlock's LayerNorms
    _one_of(cfg, "transformer_encoder.mask_future", [False], False)
    hp["speakers"] = int(_get(cfg, "max_num_of_spks", 4))
    sm = _get(cfg, "sortformer_modules")
    if int(sm.get("num_spks", hp["speakers"])) != hp["speakers"]:
        raise ConvertError(f"config sortformer_modules.num_spks = {sm.get('num_spks')} differs from "
                           f"max_num_of_spks = {hp['speakers']}")
    if not 1 <= hp["speakers"] <= 4:
        raise ConvertError(f"config max_num_of_spks = {hp['speakers']} is not supported (1 to 4)")
    tf_d = int(sm.get("tf_d_model", hp["transformer.embedding_length"]))
    if tf_d != hp["transformer.embedding_length"]:
        raise ConvertError(f"config sortformer_modules.tf_d_model = {tf_d} differs from "
                           f"transformer_encoder.hidden_size = {hp['transformer.embedding_length']}")
    for name, key in CACHE_KEYS.items():
        v = sm.get(name, CACHE_DEFAULTS[name])
        hp[key] = float(v) if name in FLOAT_KEYS else int(v)
    # SortformerEncLabelModel's async_streaming (default False): which speaker-cache update its streaming uses.
    hp["cache.async_streaming"] = bool(_one_of(cfg, "async_streaming", [False, True], False))
    return hp


def tensors_from_state_dict(sd, hp):
    sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    used = set()

    def take(name):
        if name not in sd:
            raise ConvertError(f"checkpoint tensor {name} is missing")
        used.add(name)
        return np.asarray(sd[name], dtype=np.float32)

    out = fg.encoder_tensors(take, hp)
    if hp["embedding_length"] != hp["transformer.embedding_length"]:
        for n in ("weight", "bias"):
            out.append((f"sortformer.encoder_proj.{n}", take(f"sortformer_modules.encoder_proj.{n}")))
    for i in range(hp["transformer.block_count"]):
        p = f"transformer_encoder.layers.{i}."
        for ours, theirs in TRANSFORMER_NAMES:
            for n in ("weight", "bias"):
                out.append((f"transformer.{i}.{ours}.{n}", take(f"{p}{theirs}.{n}")))
    for ours, theirs in (("hidden", "first_hidden_to_hidden"), ("speakers", "single_hidden_to_spks")):
        for n in ("weight", "bias"):
            out.append((f"sortformer.{ours}.{n}", take(f"sortformer_modules.{theirs}.{n}")))
    # hidden_to_spks (the two-input head) is trained but not used at inference: left out.
    ignored = ("preprocessor.", "sortformer_modules.hidden_to_spks.")
    leftover = sorted(k for k in sd if k not in used and not k.startswith(ignored))
    if leftover:
        raise ConvertError(f"{len(leftover)} checkpoint tensors have no place in earshot's layout: "
                           + ", ".join(leftover[:4]) + (", ..." if len(leftover) > 4 else ""))
    return out


def _is_matrix(name):
    if name.startswith("encoder."):
        return fg._is_matrix(name)
    return name.endswith(".weight") and "norm" not in name


def write_gguf(path, hp, tensors, fb, window, matrix_type="f32"):
    gguf = fg._import_gguf()
    w = gguf.GGUFWriter(str(path), ARCH)
    skip = ("features.window", "features.win_length")
    for key, value in hp.items():
        if key in skip:
            continue
        full = f"{ARCH}.{key}"
        if isinstance(value, bool):
            w.add_bool(full, value)
        elif isinstance(value, str):
            w.add_string(full, value)
        elif isinstance(value, float):
            w.add_float32(full, value)
        elif isinstance(value, list):
            w.add_key_value(full, value, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
        else:
            w.add_uint32(full, value)
    w.add_tensor("preprocessor.featurizer.fb", np.ascontiguousarray(fb))
    w.add_tensor("preprocessor.featurizer.window", np.ascontiguousarray(window))
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if _is_matrix(name):
            if matrix_type == "f16":
                a = a.astype(np.float16)
            elif matrix_type == "q8_0" and a.shape[-1] % 32 == 0:
                a = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
                w.add_tensor(name, a, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
                continue
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

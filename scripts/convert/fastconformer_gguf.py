"""NeMo FastConformer transducer config + state dict -> earshot's GGUF
(docs/fastconformer-gguf.md). Shared by nemo_to_gguf.py (and the safetensors
converter). Every config value the loader reads is mapped here; a value this
module does not know is refused (ConvertError naming the key and the value),
because a guessed flag would write a file that loads and transcribes wrongly.

GGUF is written with llama.cpp's gguf-py (the pinned tree's
third_party/src/llama.cpp/gguf-py on PYTHONPATH); only numpy is needed besides.
"""
import math
import os
import sys

import numpy as np

ARCH = "earshot-fastconformer-transducer"


class ConvertError(Exception):
    pass


def _import_gguf():
    try:
        import gguf  # noqa: F401
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        pinned = os.path.join(here, "..", "..", "third_party", "src", "llama.cpp", "gguf-py")
        sys.path.insert(0, os.path.normpath(pinned))
        try:
            import gguf  # noqa: F401
        except ImportError as e:
            raise ConvertError("cannot import gguf-py: put third_party/src/llama.cpp/gguf-py on PYTHONPATH") from e
    import gguf
    return gguf


def _get(cfg, path, default=KeyError):
    node = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node or node[part] is None:
            if default is KeyError:
                raise ConvertError(f"config key {path} is missing")
            return default
        node = node[part]
    return node


def _one_of(cfg, path, allowed, default=KeyError):
    value = _get(cfg, path, default)
    if value not in allowed:
        raise ConvertError(f"config {path} = {value!r} is not supported (known: {', '.join(map(repr, allowed))})")
    return value


def hparams_from_config(cfg):
    """The GGUF keys (without the architecture prefix) from a NeMo model config."""
    hp = encoder_hparams(cfg)
    decoder_hparams(cfg, hp)
    preprocessor_hparams(cfg, hp)
    return hp


def encoder_hparams(cfg, allow_bias=False):
    """The ConformerEncoder's keys. allow_bias: a layout with the linears' and convs' biases (NeMo's use_bias,
    the Sortformer's NEST encoder); else use_bias = True is refused."""
    enc = _get(cfg, "encoder")
    target = enc.get("_target_", "")
    if target and not target.endswith("ConformerEncoder"):
        raise ConvertError(f"config encoder._target_ = {target!r} is not supported (a ConformerEncoder)")
    _one_of(cfg, "encoder.self_attention_model", ["rel_pos"], "rel_pos")
    hp = {}
    hp["audio_ctx"] = int(_get(cfg, "encoder.pos_emb_max_len", 5000))
    hp["embedding_length"] = int(_get(cfg, "encoder.d_model"))
    hp["attention.head_count"] = int(_get(cfg, "encoder.n_heads"))
    hp["block_count"] = int(_get(cfg, "encoder.n_layers"))
    hp["feed_forward_expansion"] = int(_get(cfg, "encoder.ff_expansion_factor", 4))
    hp["attention.layer_norm_epsilon"] = 1e-5  # NeMo's LayerNorms use torch's default
    # Attention context: one [left, right] pair, or a list of them (multi-lookahead
    # models); NeMo's default at inference is the first.
    context = _get(cfg, "encoder.att_context_size", [-1, -1])
    if context and isinstance(context[0], (list, tuple)):
        contexts = [list(c) for c in context]
        if len({c[0] if len(c) == 2 else None for c in contexts}) != 1:
            raise ConvertError(f"config encoder.att_context_size = {context!r}: the pairs' left contexts differ "
                               "(earshot's layout keeps one left context and a list of right ones)")
        if len(contexts) > 1:
            hp["attention.right_contexts"] = sorted({int(c[1]) for c in contexts})
        context = contexts[0]
    if len(context) != 2 or not all(isinstance(v, int) for v in context):
        raise ConvertError(f"config encoder.att_context_size = {context!r} is not a [left, right] pair")
    style = _one_of(cfg, "encoder.att_context_style", ["regular", "chunked_limited"], "regular")
    if style == "chunked_limited" and list(context) == [-1, -1]:
        raise ConvertError("config encoder.att_context_style = 'chunked_limited' needs a limited att_context_size")
    hp["attention.context"] = [int(context[0]), int(context[1])]
    hp["attention.context_style"] = style
    hp["conv.kernel_size"] = int(_get(cfg, "encoder.conv_kernel_size"))
    hp["conv.norm"] = _one_of(cfg, "encoder.conv_norm_type", ["batch_norm", "layer_norm"], "batch_norm")
    conv_context = _get(cfg, "encoder.conv_context_size", None)
    k = hp["conv.kernel_size"]
    if conv_context is None or list(conv_context) == [(k - 1) // 2, (k - 1) // 2]:
        hp["conv.causal"] = False
    elif conv_context == "causal" or list(conv_context) == [k - 1, 0]:
        hp["conv.causal"] = True
    else:
        raise ConvertError(f"config encoder.conv_context_size = {conv_context!r} is not supported "
                           "(null, 'causal', [k-1, 0] or [(k-1)/2, (k-1)/2])")
    hp["subsampling.kind"] = _one_of(cfg, "encoder.subsampling", ["dw_striding"], "striding")
    hp["subsampling.factor"] = int(_get(cfg, "encoder.subsampling_factor", 4))
    hp["subsampling.channels"] = int(_get(cfg, "encoder.subsampling_conv_channels"))
    hp["subsampling.causal"] = bool(_one_of(cfg, "encoder.causal_downsampling", [False, True], False))
    hp["xscaling"] = bool(_one_of(cfg, "encoder.xscaling", [False, True], True))
    use_bias = bool(_one_of(cfg, "encoder.use_bias", [False, True], True))
    if use_bias and not allow_bias:
        raise ConvertError("config encoder.use_bias = True is not supported "
                           "(earshot's transducer layout has no attention/FFN/conv bias tensors)")
    hp["bias"] = use_bias
    hp["subsampling.features"] = int(_get(cfg, "encoder.feat_in"))
    return hp


def decoder_hparams(cfg, hp):
    """The transducer's decoder and joint keys, added to hp."""
    hp["prediction.embedding_length"] = int(_get(cfg, "decoder.prednet.pred_hidden"))
    hp["prediction.block_count"] = int(_get(cfg, "decoder.prednet.pred_rnn_layers", 1))
    joint_hidden = int(_get(cfg, "joint.jointnet.joint_hidden"))
    if joint_hidden != hp["prediction.embedding_length"]:
        raise ConvertError(f"config joint.jointnet.joint_hidden = {joint_hidden} differs from "
                           f"decoder.prednet.pred_hidden = {hp['prediction.embedding_length']} (not supported)")
    _one_of(cfg, "joint.jointnet.activation", ["relu"], "relu")
    hp["vocab_size"] = int(_get(cfg, "decoder.vocab_size"))
    hp["decoding.max_symbols"] = int(_get(cfg, "decoding.greedy.max_symbols", 10))
    durations = _get(cfg, "model_defaults.tdt_durations", None)
    if durations is None:
        durations = _get(cfg, "decoding.durations", None)
    strategy = _get(cfg, "decoding.strategy", "greedy_batch")
    if strategy not in ("greedy", "greedy_batch"):
        raise ConvertError(f"config decoding.strategy = {strategy!r} is not supported (greedy, greedy_batch)")
    if durations:
        hp["decoder.kind"] = "tdt"
        hp["decoder.durations"] = [int(d) for d in durations]
    else:
        hp["decoder.kind"] = "rnnt"
    extra = int(_get(cfg, "joint.num_extra_outputs", len(durations or [])))
    if extra != len(durations or []):
        raise ConvertError(f"config joint.num_extra_outputs = {extra} differs from the {len(durations or [])} "
                           "TDT durations")


def preprocessor_hparams(cfg, hp):
    """The featuriser's keys (AudioToMelSpectrogramPreprocessor), added to hp."""
    # Preprocessor (AudioToMelSpectrogramPreprocessor). Dither is a training-time
    # augmentation in NeMo (off in eval), so it is not written.
    pre = "preprocessor."
    target = _get(cfg, pre + "_target_", "")
    if target and not target.endswith("AudioToMelSpectrogramPreprocessor"):
        raise ConvertError(f"config preprocessor._target_ = {target!r} is not supported")
    sr = int(_get(cfg, pre + "sample_rate", 16000))
    hp["features.sample_rate"] = sr
    hp["features.n_mels"] = int(_get(cfg, pre + "features", 64))
    if hp["features.n_mels"] != hp["subsampling.features"]:
        raise ConvertError(f"config preprocessor.features = {hp['features.n_mels']} differs from encoder.feat_in = "
                           f"{hp['subsampling.features']}")
    del hp["subsampling.features"]
    win_length = int(round(float(_get(cfg, pre + "window_size", 0.02)) * sr))
    hp["features.hop_length"] = int(round(float(_get(cfg, pre + "window_stride", 0.01)) * sr))
    n_fft = _get(cfg, pre + "n_fft", None)
    hp["features.n_fft"] = int(n_fft) if n_fft else 2 ** math.ceil(math.log2(win_length))
    hp["features.win_length"] = win_length
    hp["features.window"] = _one_of(cfg, pre + "window", ["hann", "hamming", "blackman", "bartlett", "ones"], "hann")
    normalize = _one_of(cfg, pre + "normalize", ["per_feature", "NA", "none"], "per_feature")
    hp["features.normalize"] = "per_feature" if normalize == "per_feature" else "none"
    # NeMo's default is 0.97; an explicit null turns pre-emphasis off.
    hp["features.preemphasis"] = float(_get(cfg, pre + "preemph", 0.97)) if (
        _get(cfg, "preprocessor", {}).get("preemph", 0.97) is not None) else 0.0
    _one_of(cfg, pre + "log", [True], True)
    _one_of(cfg, pre + "log_zero_guard_type", ["add"], "add")
    hp["features.log_guard"] = float(_get(cfg, pre + "log_zero_guard_value", 2 ** -24))
    _one_of(cfg, pre + "mag_power", [2.0, 2], 2.0)
    _one_of(cfg, pre + "frame_splicing", [1], 1)
    _one_of(cfg, pre + "pad_to", [0, 16], 16)  # padding the batch only; no effect on the features
    _one_of(cfg, pre + "exact_pad", [False], False)
    return hp


def slaney_filters(n_mels, n_fft, sr):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm='slaney'), as NeMo builds it."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, step = min_log_hz / f_sp, math.log(6.4) / 27.0

    def hz_to_mel(f):
        return f / f_sp if f < min_log_hz else min_log_mel + math.log(f / min_log_hz) / step

    def mel_to_hz(m):
        return m * f_sp if m < min_log_mel else min_log_hz * math.exp(step * (m - min_log_mel))

    lo, hi = hz_to_mel(0.0), hz_to_mel(sr / 2.0)
    points = np.array([mel_to_hz(lo + (hi - lo) * i / (n_mels + 1)) for i in range(n_mels + 2)])
    freqs = np.arange(n_fft // 2 + 1) * sr / n_fft
    fb = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(n_mels):
        up = (freqs - points[m]) / (points[m + 1] - points[m])
        down = (points[m + 2] - freqs) / (points[m + 2] - points[m + 1])
        fb[m] = np.maximum(0.0, np.minimum(up, down)) * (2.0 / (points[m + 2] - points[m]))
    return fb.astype(np.float32)


def window_values(kind, n):
    """torch.<kind>_window(n, periodic=False), as NeMo's featuriser makes it."""
    if kind == "ones":
        return np.ones(n, dtype=np.float32)
    i = np.arange(n, dtype=np.float64)
    x = 2 * math.pi * i / (n - 1)
    w = {"hann": lambda: 0.5 - 0.5 * np.cos(x),
         "hamming": lambda: 0.54 - 0.46 * np.cos(x),
         "blackman": lambda: 0.42 - 0.5 * np.cos(x) + 0.08 * np.cos(2 * x),
         "bartlett": lambda: 1 - np.abs(2 * i / (n - 1) - 1)}[kind]()
    return w.astype(np.float32)


def _is_matrix(name):
    suffixes = ("linear1.weight", "linear2.weight", "pointwise_conv1.weight", "pointwise_conv2.weight",
                "linear_q.weight", "linear_k.weight", "linear_v.weight", "linear_out.weight", "linear_pos.weight",
                "pre_encode.out.weight", "joint.enc.weight", "joint.pred.weight", "joint.joint_net.2.weight",
                "prediction.embed.weight", "prompt_kernel.0.weight", "prompt_kernel.2.weight")
    return name.endswith(suffixes) or "dec_rnn.lstm.weight_" in name


def _lstm_gates(a, p):
    """PyTorch's i, f, g, o gate blocks -> whisper.cpp's i, f, o, c (g is the cell input)."""
    i, f, g, o = (a[k * p:(k + 1) * p] for k in range(4))
    return np.concatenate([i, f, o, g], axis=0)


PROMPT_DICTIONARY_PATHS = ("prompt_dictionary", "model_defaults.prompt_dictionary", "train_ds.prompt_dictionary")


def prompt_kernel_hparams(cfg, sd, hp):
    """Nemotron 3.5's language prompt kernel (prompt_kernel = Sequential(Linear, ReLU, Linear) over the encoder
    output concatenated with a one-hot of the language's slot): adds the prompt.* keys to hp when the checkpoint has
    one, from the config's prompt_dictionary (language tag -> slot), and refuses what it cannot map."""
    names = sorted(k for k in sd if k.startswith("prompt_kernel."))
    if not names:
        return
    known = ["prompt_kernel.0.bias", "prompt_kernel.0.weight", "prompt_kernel.2.bias", "prompt_kernel.2.weight"]
    if names != known:
        raise ConvertError(f"checkpoint prompt kernel tensors {names} are not the known Linear, ReLU, Linear "
                           f"({', '.join(known)})")
    if cfg is not None and _get(cfg, "concat", True) is False:
        raise ConvertError("config concat = False with a prompt kernel is not supported (the kernel is applied to "
                           "the encoder output concatenated with the language one-hot)")
    w1, w2 = np.asarray(sd["prompt_kernel.0.weight"]), np.asarray(sd["prompt_kernel.2.weight"])
    d = hp["embedding_length"]
    if w1.ndim != 2 or w2.ndim != 2 or w1.shape[1] <= d or w2.shape != (d, w1.shape[0]):
        raise ConvertError(f"checkpoint prompt kernel shapes {list(w1.shape)} and {list(w2.shape)} do not take "
                           f"d_model {d} plus a one-hot back to d_model")
    dictionary = None
    for path in PROMPT_DICTIONARY_PATHS:
        dictionary = _get(cfg, path, None) if cfg is not None else None
        if dictionary:
            break
    if not dictionary:
        raise ConvertError("the checkpoint has a language prompt kernel but the config has no prompt_dictionary "
                           f"(looked at {', '.join(PROMPT_DICTIONARY_PATHS)}): earshot cannot tell which slot is "
                           "which language")
    n_prompts = w1.shape[1] - d
    declared = _get(cfg, "model_defaults.num_prompts", None)
    if declared is not None and int(declared) != n_prompts:
        raise ConvertError(f"config model_defaults.num_prompts = {declared} differs from the prompt kernel's "
                           f"one-hot width {n_prompts}")
    languages, slots = [], []
    # In slot order: a YAML or JSON map's order is the writer's, and a bare code ("en") takes the first
    # locale of its language in the file's order.
    for language, slot in sorted(dict(dictionary).items(), key=lambda item: (item[1] if isinstance(item[1], int) else -1, str(item[0]))):
        if not isinstance(slot, int) or not 0 <= slot < n_prompts:
            raise ConvertError(f"config prompt_dictionary[{language!r}] = {slot!r} is not a slot of the "
                               f"{n_prompts}-wide one-hot")
        languages.append(str(language))
        slots.append(slot)
    hp["prompt.size"] = n_prompts
    hp["prompt.hidden"] = int(w1.shape[0])
    hp["prompt.languages"] = languages
    hp["prompt.slots"] = slots


def encoder_tensors(take, hp):
    """The encoder's (name, float32 array in GGUF's row-major shape): pre_encode, then each layer (with its biases
    when hp["bias"]). take(name) returns a state-dict tensor and marks it used."""
    out = []
    c = hp["subsampling.channels"]
    out.append(("encoder.pre_encode.out.weight", take("encoder.pre_encode.out.weight")))
    out.append(("encoder.pre_encode.out.bias", take("encoder.pre_encode.out.bias")))
    for conv in ("0", "2", "3", "5", "6"):
        out.append((f"encoder.pre_encode.conv.{conv}.weight", take(f"encoder.pre_encode.conv.{conv}.weight")))
        out.append((f"encoder.pre_encode.conv.{conv}.bias",
                    take(f"encoder.pre_encode.conv.{conv}.bias").reshape(c, 1, 1)))  # ne [1, 1, C]
    names = ["norm_feed_forward1.weight", "norm_feed_forward1.bias", "feed_forward1.linear1.weight",
             "feed_forward1.linear2.weight", "norm_conv.weight", "norm_conv.bias", "conv.pointwise_conv1.weight",
             "conv.depthwise_conv.weight", "conv.batch_norm.weight", "conv.batch_norm.bias",
             "conv.batch_norm.running_mean", "conv.batch_norm.running_var", "conv.pointwise_conv2.weight",
             "norm_self_att.weight", "norm_self_att.bias", "self_attn.pos_bias_u", "self_attn.pos_bias_v",
             "self_attn.linear_q.weight", "self_attn.linear_k.weight", "self_attn.linear_v.weight",
             "self_attn.linear_out.weight", "self_attn.linear_pos.weight", "norm_feed_forward2.weight",
             "norm_feed_forward2.bias", "feed_forward2.linear1.weight", "feed_forward2.linear2.weight",
             "norm_out.weight", "norm_out.bias"]
    if hp.get("bias"):
        names += [f"feed_forward{n}.linear{k}.bias" for n in (1, 2) for k in (1, 2)]
        names += [f"self_attn.linear_{m}.bias" for m in ("q", "k", "v", "out")]
        names += ["conv.pointwise_conv1.bias", "conv.depthwise_conv.bias", "conv.pointwise_conv2.bias"]
    if hp["conv.norm"] == "layer_norm":
        # NeMo's ConformerConvolution keeps the attribute name batch_norm for its LayerNorm.
        names = [n for n in names if not n.endswith(("running_mean", "running_var"))]
    for layer in range(hp["block_count"]):
        for n in names:
            name = f"encoder.layers.{layer}.{n}"
            a = take(name)
            if n.startswith("conv.") and a.ndim == 3:  # [out, in, k]: pointwise k = 1, depthwise in = 1
                a = a.reshape(a.shape[0], -1)
            out.append((name, a))
    return out


def tensors_from_state_dict(sd, hp, cfg=None):
    """(name, float32 numpy array in GGUF's row-major shape) in the loader's order; `sd` maps names to numpy.
    A prompt kernel (Nemotron 3.5) needs `cfg` for its language dictionary and adds its keys to hp."""
    prompt_kernel_hparams(cfg, sd, hp)
    sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    used = set()

    def take(name):
        if name not in sd:
            raise ConvertError(f"checkpoint tensor {name} is missing")
        used.add(name)
        return np.asarray(sd[name], dtype=np.float32)

    out = encoder_tensors(take, hp)
    p = hp["prediction.embedding_length"]
    out.append(("decoder.prediction.embed.weight", take("decoder.prediction.embed.weight")))
    for layer in range(hp["prediction.block_count"]):
        lstm = "decoder.prediction.dec_rnn.lstm."
        out.append((f"{lstm}weight_ih_l{layer}", _lstm_gates(take(f"{lstm}weight_ih_l{layer}"), p)))
        out.append((f"{lstm}weight_hh_l{layer}", _lstm_gates(take(f"{lstm}weight_hh_l{layer}"), p)))
        bias = take(f"{lstm}bias_ih_l{layer}") + take(f"{lstm}bias_hh_l{layer}")
        out.append((f"{lstm}bias_h_l{layer}", _lstm_gates(bias, p)))
    for n in ("joint.pred.weight", "joint.pred.bias", "joint.enc.weight", "joint.enc.bias",
              "joint.joint_net.2.weight", "joint.joint_net.2.bias"):
        out.append((n, take(n)))
    if "prompt.size" in hp:
        for n in ("prompt_kernel.0.weight", "prompt_kernel.0.bias", "prompt_kernel.2.weight", "prompt_kernel.2.bias"):
            out.append((n, take(n)))
    leftover = sorted(k for k in sd if k not in used and not k.startswith("preprocessor."))
    if leftover:
        raise ConvertError(f"{len(leftover)} checkpoint tensors have no place in earshot's layout: "
                           + ", ".join(leftover[:4]) + (", ..." if len(leftover) > 4 else ""))
    return out


def featuriser(sd, hp, source="auto"):
    """(filter bank [n_mels, n_fft/2+1], window, where from). source: auto (the checkpoint's
    preprocessor.featurizer.fb/window buffers when present, else computed), checkpoint, computed."""
    n_mels, n_fft = hp["features.n_mels"], hp["features.n_fft"]
    has = "preprocessor.featurizer.fb" in sd and "preprocessor.featurizer.window" in sd
    if source == "checkpoint" and not has:
        raise ConvertError("--features checkpoint: the checkpoint has no preprocessor.featurizer.fb/window")
    if has and source != "computed":
        fb = np.asarray(sd["preprocessor.featurizer.fb"], dtype=np.float32).reshape(n_mels, n_fft // 2 + 1)
        window = np.asarray(sd["preprocessor.featurizer.window"], dtype=np.float32).reshape(-1)
        return fb, window, "checkpoint"
    return (slaney_filters(n_mels, n_fft, hp["features.sample_rate"]),
            window_values(hp["features.window"], hp["features.win_length"]), "computed")


def write_gguf(path, hp, pieces, tensors, fb, window, matrix_type="f32"):
    gguf = _import_gguf()
    if len(pieces) != hp["vocab_size"]:
        raise ConvertError(f"the tokenizer has {len(pieces)} pieces, config decoder.vocab_size says {hp['vocab_size']}")
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
        elif isinstance(value, list) and value and isinstance(value[0], str):
            w.add_array(full, value)
        elif isinstance(value, list):  # the loader reads the context as i32, the durations as u32
            signed = key in ("attention.context", "attention.right_contexts")
            sub = gguf.GGUFValueType.INT32 if signed else gguf.GGUFValueType.UINT32
            w.add_key_value(full, value, gguf.GGUFValueType.ARRAY, sub_type=sub)
        else:
            w.add_uint32(full, value)
    w.add_array("tokenizer.pieces", list(pieces))
    w.add_tensor("preprocessor.featurizer.fb", np.ascontiguousarray(fb))  # ne [n_fft/2+1, n_mels]
    w.add_tensor("preprocessor.featurizer.window", np.ascontiguousarray(window))
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if matrix_type == "f16" and _is_matrix(name):
            a = a.astype(np.float16)
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

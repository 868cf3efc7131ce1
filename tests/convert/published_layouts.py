"""Writers of the Parakeet GGUF layouts two other projects publish, from a NeMo config, state dict and
pieces, laid out as their converters write them (read for facts, not copied):

  - transcribe.cpp, scripts/convert-parakeet.py (handy-computer/transcribe.cpp 0.2.1): general.* identity,
    stt.variant / stt.capability.*, stt.parakeet.head_kind, tokenizer.ggml.* (the pieces, then '<blank>'),
    stt.parakeet.encoder/predictor/joint/tdt/prompt.* and stt.frontend.*; tensors renamed (enc.pre_encode.*,
    enc.blocks.{i}.*, pred.embed.weight, pred.lstm.{i}.{Wx,Wh,bias} with bias = bias_ih + bias_hh,
    joint.{enc,pred,out}.*, prompt.mlp.*), PyTorch's shapes, f32 (its quantiser makes linears and conv
    kernels f16 or quantised: types= picks them here), no filter bank.
  - parakeet.cpp, scripts/convert_parakeet_to_gguf.py (mudler/parakeet.cpp): parakeet.* keys, every
    state-dict tensor under its NeMo name but the preprocessor's (fb and window kept) and 0-dimensional ones,
    f32 but its --dtype's allowlisted linears (f16 or q8_0 where ne[0] is a multiple of 32).
"""
import re

import numpy as np

import gguf

# transcribe.cpp's encoder block table: NeMo's module prefix -> its name.
BLOCK = [("norm_feed_forward1.", "norm_ff1."), ("feed_forward1.", "ff1."), ("norm_feed_forward2.", "norm_ff2."),
         ("feed_forward2.", "ff2."), ("norm_self_att.", "norm_attn."), ("self_attn.", "attn."),
         ("norm_conv.", "norm_conv."), ("conv.pointwise_conv1.", "conv.pointwise1."),
         ("conv.pointwise_conv2.", "conv.pointwise2."), ("conv.depthwise_conv.", "conv.depthwise."),
         ("conv.batch_norm.", "conv.bn."), ("norm_out.", "norm_out.")]
BLOCK_SUFFIXES = ["norm_feed_forward1.weight", "norm_feed_forward1.bias", "feed_forward1.linear1.weight",
                  "feed_forward1.linear2.weight", "norm_self_att.weight", "norm_self_att.bias",
                  "self_attn.linear_q.weight", "self_attn.linear_k.weight", "self_attn.linear_v.weight",
                  "self_attn.linear_out.weight", "self_attn.linear_pos.weight", "self_attn.pos_bias_u",
                  "self_attn.pos_bias_v", "norm_conv.weight", "norm_conv.bias", "conv.pointwise_conv1.weight",
                  "conv.depthwise_conv.weight", "conv.pointwise_conv2.weight", "conv.batch_norm.weight",
                  "conv.batch_norm.bias", "norm_feed_forward2.weight", "norm_feed_forward2.bias",
                  "feed_forward2.linear1.weight", "feed_forward2.linear2.weight", "norm_out.weight", "norm_out.bias"]
BIAS_SUFFIXES = ["feed_forward1.linear1.bias", "feed_forward1.linear2.bias", "self_attn.linear_q.bias",
                 "self_attn.linear_k.bias", "self_attn.linear_v.bias", "self_attn.linear_out.bias",
                 "conv.pointwise_conv1.bias", "conv.depthwise_conv.bias", "conv.pointwise_conv2.bias",
                 "feed_forward2.linear1.bias", "feed_forward2.linear2.bias"]
LANG_TAG = re.compile(r"^<[a-z]{2,3}-[A-Za-z]{2,4}>$")


def tc_block_name(i, suffix):
    for nemo, theirs in BLOCK:
        if suffix.startswith(nemo):
            return f"enc.blocks.{i}.{theirs}{suffix[len(nemo):]}"
    raise KeyError(suffix)


def _f32(t):
    return np.ascontiguousarray(t.detach().cpu().numpy().astype(np.float32))


def _context(raw):
    """transcribe.cpp's _resolve_att_context_size(_choices): the first pair, and every pair of a nested list."""
    if raw and isinstance(raw[0], (list, tuple)):
        return [(int(a), int(b)) for a, b in raw]
    return [(int(raw[0]), int(raw[1]))]


def _add(w, name, a, qtype):
    """Adds a tensor as f32, f16 or a quantised type (gguf-py's own quantiser for the last)."""
    if qtype is None or qtype == gguf.GGMLQuantizationType.F32:
        w.add_tensor(name, a)
    elif qtype == gguf.GGMLQuantizationType.F16:
        w.add_tensor(name, a.astype(np.float16))
    else:
        raw = gguf.quantize(a, qtype)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)


def _finish(w, extra=()):
    for key, val, vt in extra:
        w.add_key_value(key, val, vt, sub_type=gguf.GGUFValueType.INT32 if vt == gguf.GGUFValueType.ARRAY else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_transcribe_cpp(path, cfg, sd, pieces, types=None, extra=()):
    """types: {transcribe.cpp tensor name: GGMLQuantizationType} for what its quantiser would change;
    extra: (key, value, GGUFValueType) set last (the refusal tests' edits)."""
    types = types or {}
    enc, pre, dec = cfg["encoder"], cfg["preprocessor"], cfg["decoder"]
    joint = cfg["joint"]
    decoding = cfg.get("decoding") or {}
    durations = decoding.get("durations")
    head = "tdt" if durations else "rnnt"
    n_layers, d = int(enc["n_layers"]), int(enc["d_model"])
    use_bias = f"encoder.layers.0.feed_forward1.linear1.bias" in sd
    style = str(enc.get("att_context_style", "regular"))
    choices = _context(enc.get("att_context_size") or [-1, -1])
    if style == "chunked_limited" and len(choices) >= 2:
        choices = sorted(choices, key=lambda lr: -lr[1])  # the converter's max-R-first order
    k = int(enc["conv_kernel_size"])
    conv = enc.get("conv_context_size")
    conv_lr = (k - 1, 0) if conv == "causal" else ((k - 1) // 2, (k - 1) // 2) if conv is None else tuple(conv)
    md = cfg.get("model_defaults") or {}
    has_prompt = "prompt_kernel.0.weight" in sd

    w = gguf.GGUFWriter(str(path), "parakeet")
    w.add_string("general.name", "Parakeet (synthetic)")
    w.add_string("general.basename", "parakeet-tdt" if head == "tdt" else "parakeet-rnnt")
    w.add_string("general.version", "v1")
    w.add_string("general.size_label", "0.6B")
    w.add_string("general.author", "NVIDIA")
    w.add_string("general.organization", "nvidia")
    w.add_string("general.license", "cc-by-4.0")
    w.add_uint32("general.file_type", 0)
    w.add_array("general.languages", ["en"])
    w.add_string("stt.variant", "synthetic")
    w.add_bool("stt.capability.streaming", style == "chunked_limited" and choices[0][0] >= 0 and choices[0][1] >= 0)
    w.add_string("stt.parakeet.head_kind", head)
    tokens = list(pieces) + ["<blank>"]
    types_ = [2 if p == "<unk>" else 3 if LANG_TAG.match(p) else 1 for p in pieces] + [3]
    w.add_string("tokenizer.ggml.model", "bpe")
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.blank_token_id", len(pieces))
    p = "stt.parakeet."
    w.add_uint32(p + "encoder.n_layers", n_layers)
    w.add_uint32(p + "encoder.d_model", d)
    w.add_uint32(p + "encoder.n_heads", int(enc["n_heads"]))
    w.add_uint32(p + "encoder.d_ff", d * int(enc["ff_expansion_factor"]))
    w.add_uint32(p + "encoder.conv_kernel", k)
    w.add_uint32(p + "encoder.subsampling_factor", int(enc["subsampling_factor"]))
    w.add_uint32(p + "encoder.subsampling_channels", int(enc["subsampling_conv_channels"]))
    w.add_uint32(p + "encoder.pos_emb_max_len", int(enc["pos_emb_max_len"]))
    w.add_bool(p + "encoder.use_bias", use_bias)
    w.add_bool(p + "encoder.xscaling", bool(enc.get("xscaling", True)))
    w.add_int32(p + "encoder.att_context_left", choices[0][0])
    w.add_int32(p + "encoder.att_context_right", choices[0][1])
    w.add_string(p + "encoder.att_context_style", style)
    w.add_int32(p + "encoder.conv_context_left", conv_lr[0])
    w.add_int32(p + "encoder.conv_context_right", conv_lr[1])
    w.add_string(p + "encoder.conv_norm_type", str(enc.get("conv_norm_type", "batch_norm")))
    if style == "chunked_limited":
        w.add_array(p + "encoder.att_context_size_choices", [v for lr in choices for v in lr])
        # NeMo's streaming_cfg of the live encoder (the FastConformer values its comments state).
        w.add_int32(p + "encoder.streaming.pre_encode_cache_size", 9)
        w.add_int32(p + "encoder.streaming.drop_extra_pre_encoded", 2)
        w.add_int32(p + "encoder.streaming.sampling_frames_first", 1)
    prednet = dec["prednet"]
    w.add_uint32(p + "predictor.hidden", int(prednet["pred_hidden"]))
    w.add_uint32(p + "predictor.n_layers", int(prednet["pred_rnn_layers"]))
    w.add_uint32(p + "predictor.vocab", int(dec["vocab_size"]) + 1)
    w.add_uint32(p + "joint.hidden", int(joint["jointnet"]["joint_hidden"]))
    w.add_uint32(p + "joint.num_extra_outputs", int(joint.get("num_extra_outputs", 0)))
    w.add_string(p + "joint.activation", str(joint["jointnet"]["activation"]).lower())
    if durations:
        w.add_array(p + "tdt.durations", [int(x) for x in durations])
        w.add_uint32(p + "tdt.max_symbols", int((decoding.get("greedy") or {}).get("max_symbols") or 10))
    if has_prompt:
        dictionary = md["prompt_dictionary"]
        w.add_uint32(p + "prompt.num_prompts", int(md["num_prompts"]))
        w.add_uint32(p + "prompt.hidden", int(sd["prompt_kernel.0.weight"].shape[0]))
        w.add_string(p + "prompt.field", "target_lang")
        w.add_string(p + "prompt.activation", "relu")
        w.add_array(p + "prompt.dictionary.locales", [str(key) for key in dictionary])
        w.add_array(p + "prompt.dictionary.indices", [int(v) for v in dictionary.values()])
        w.add_uint32(p + "prompt.auto_id", int(dictionary["auto"]))
    sr = int(pre["sample_rate"])
    w.add_string("stt.frontend.type", "mel")
    w.add_uint32("stt.frontend.num_mels", int(pre["features"]))
    w.add_uint32("stt.frontend.sample_rate", sr)
    w.add_uint32("stt.frontend.n_fft", int(pre["n_fft"]))
    w.add_uint32("stt.frontend.win_length", int(round(float(pre["window_size"]) * sr)))
    w.add_uint32("stt.frontend.hop_length", int(round(float(pre["window_stride"]) * sr)))
    w.add_string("stt.frontend.window", str(pre["window"]))
    w.add_string("stt.frontend.normalize", "none" if pre["normalize"] in ("NA", "none", None) else pre["normalize"])
    w.add_float32("stt.frontend.dither", float(pre["dither"]))
    w.add_float32("stt.frontend.pre_emphasis", 0.97)
    w.add_float32("stt.frontend.f_min", 0.0)
    w.add_float32("stt.frontend.f_max", sr / 2.0)
    # The bulk tokenizer arrays last (its writer's trailer).
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [float(-i) for i in range(len(pieces))] + [0.0])
    w.add_array("tokenizer.ggml.token_type", types_)

    def add(nemo, name):
        _add(w, name, _f32(sd[nemo]), types.get(name))

    for conv in ("0", "2", "3", "5", "6"):
        for kind in ("weight", "bias"):
            add(f"encoder.pre_encode.conv.{conv}.{kind}", f"enc.pre_encode.conv.{conv}.{kind}")
    add("encoder.pre_encode.out.weight", "enc.pre_encode.out.weight")
    add("encoder.pre_encode.out.bias", "enc.pre_encode.out.bias")
    for i in range(n_layers):
        for s in BLOCK_SUFFIXES:
            add(f"encoder.layers.{i}.{s}", tc_block_name(i, s))
        if str(enc.get("conv_norm_type", "batch_norm")) == "batch_norm":
            for s in ("conv.batch_norm.running_mean", "conv.batch_norm.running_var"):
                add(f"encoder.layers.{i}.{s}", tc_block_name(i, s))
        if use_bias:
            for s in BIAS_SUFFIXES:
                add(f"encoder.layers.{i}.{s}", tc_block_name(i, s))
    add("decoder.prediction.embed.weight", "pred.embed.weight")
    lstm = "decoder.prediction.dec_rnn.lstm."
    for i in range(int(prednet["pred_rnn_layers"])):
        add(f"{lstm}weight_ih_l{i}", f"pred.lstm.{i}.Wx")
        add(f"{lstm}weight_hh_l{i}", f"pred.lstm.{i}.Wh")
        summed = np.ascontiguousarray(_f32(sd[f"{lstm}bias_ih_l{i}"]) + _f32(sd[f"{lstm}bias_hh_l{i}"]))
        _add(w, f"pred.lstm.{i}.bias", summed, None)
    for nemo, name in (("joint.enc.weight", "joint.enc.weight"), ("joint.enc.bias", "joint.enc.bias"),
                       ("joint.pred.weight", "joint.pred.weight"), ("joint.pred.bias", "joint.pred.bias"),
                       ("joint.joint_net.2.weight", "joint.out.weight"), ("joint.joint_net.2.bias", "joint.out.bias")):
        add(nemo, name)
    if has_prompt:
        for s in ("0.weight", "0.bias", "2.weight", "2.bias"):
            add(f"prompt_kernel.{s}", f"prompt.mlp.{s}")
    _finish(w, extra)


PC_QUANTIZABLE = [re.compile(p) for p in (
    r"^encoder\.layers\.\d+\.feed_forward[12]\.linear[12]\.weight$",
    r"^encoder\.layers\.\d+\.self_attn\.linear_(q|k|v|out|pos)\.weight$",
    r"^encoder\.pre_encode\.out\.weight$", r"^joint\.enc\.weight$", r"^joint\.pred\.weight$")]


def parakeet_cpp_type(name, ne, dtype):
    """parakeet.cpp's should_quantize: the allowlisted linears of >= 32 x 32 (q8_0: ne[0] % 32 == 0)."""
    if dtype == "f32" or not any(r.match(name) for r in PC_QUANTIZABLE) or len(ne) < 2 or min(ne[:2]) < 32:
        return None
    if dtype == "f16":
        return gguf.GGMLQuantizationType.F16
    return gguf.GGMLQuantizationType.Q8_0 if ne[0] % 32 == 0 else None


def write_parakeet_cpp(path, cfg, sd, pieces, dtype="f32", streaming_cfg=None, extra=()):
    enc, pre, dec, joint = cfg["encoder"], cfg["preprocessor"], cfg["decoder"], cfg["joint"]
    decoding = cfg.get("decoding") or {}
    md = cfg.get("model_defaults") or {}
    durations = decoding.get("durations") or md.get("tdt_durations")
    arch = "tdt" if (decoding.get("durations") or joint.get("num_extra_outputs", 0)) else "rnnt"
    w = gguf.GGUFWriter(str(path), "parakeet")
    w.add_string("general.name", "synthetic.nemo")
    w.add_string("parakeet.arch", arch)
    d = int(enc["d_model"])
    w.add_uint32("parakeet.encoder.feat_in", int(enc["feat_in"]))
    w.add_uint32("parakeet.encoder.d_model", d)
    w.add_uint32("parakeet.encoder.n_layers", int(enc["n_layers"]))
    w.add_uint32("parakeet.encoder.n_heads", int(enc["n_heads"]))
    w.add_uint32("parakeet.encoder.ff_dim", d * int(enc.get("ff_expansion_factor", 4)))
    w.add_uint32("parakeet.encoder.conv_kernel", int(enc["conv_kernel_size"]))
    w.add_string("parakeet.encoder.conv_norm_type", str(enc.get("conv_norm_type", "batch_norm")))
    w.add_uint32("parakeet.encoder.subsampling_factor", int(enc["subsampling_factor"]))
    w.add_uint32("parakeet.encoder.subsampling_conv_channels", int(enc["subsampling_conv_channels"]))
    w.add_bool("parakeet.encoder.xscaling", bool(enc.get("xscaling", True)))
    w.add_uint32("parakeet.encoder.pos_emb_max_len", int(enc.get("pos_emb_max_len", 5000)))
    w.add_bool("parakeet.encoder.use_bias", bool(enc.get("use_bias", True)))
    if md.get("initialize_prompt_feature") and md.get("prompt_dictionary"):
        dictionary = md["prompt_dictionary"]
        w.add_bool("parakeet.prompt.present", True)
        w.add_uint32("parakeet.prompt.num_prompts", int(md.get("num_prompts", 128)))
        w.add_array("parakeet.prompt.dictionary.keys", [str(key) for key in dictionary])
        w.add_array("parakeet.prompt.dictionary.values", [int(v) for v in dictionary.values()])
        w.add_string("parakeet.prompt.default_lang", "auto" if "auto" in dictionary else list(dictionary)[0])
    style = str(enc.get("att_context_style", "regular"))
    if style != "regular":
        ctx = enc.get("att_context_size") or [-1, -1]
        if ctx and isinstance(ctx[0], (list, tuple)):
            left, right = int(ctx[0][0]), int(ctx[0][1])
            w.add_array("parakeet.encoder.att_context_presets", [int(v) for lr in ctx for v in lr])
        else:
            left, right = int(ctx[0]), int(ctx[1])
        w.add_int32("parakeet.encoder.att_context_left", left)
        w.add_int32("parakeet.encoder.att_context_right", right)
        w.add_string("parakeet.encoder.att_context_style", style)
        w.add_bool("parakeet.encoder.causal_downsampling", bool(enc.get("causal_downsampling", False)))
        w.add_bool("parakeet.encoder.conv_causal", enc.get("conv_context_size") == "causal")
        # NeMo's encoder.streaming_cfg (setup_streaming_params), which needs NeMo: the caller's values.
        sc = streaming_cfg or {}
        w.add_array("parakeet.streaming.chunk_size", sc.get("chunk_size", [1, 8]))
        w.add_array("parakeet.streaming.shift_size", sc.get("shift_size", [1, 8]))
        w.add_int32("parakeet.streaming.cache_drop_size", sc.get("cache_drop_size", 0))
        w.add_int32("parakeet.streaming.last_channel_cache_size", sc.get("last_channel_cache_size", left))
        w.add_int32("parakeet.streaming.valid_out_len", sc.get("valid_out_len", right + 1))
        w.add_array("parakeet.streaming.pre_encode_cache_size", sc.get("pre_encode_cache_size", [0, 9]))
        w.add_int32("parakeet.streaming.drop_extra_pre_encoded", sc.get("drop_extra_pre_encoded", 2))
    sr = int(pre["sample_rate"])
    w.add_uint32("parakeet.preprocessor.sample_rate", sr)
    w.add_uint32("parakeet.preprocessor.n_mels", int(pre["features"]))
    w.add_uint32("parakeet.preprocessor.n_fft", int(pre["n_fft"]))
    w.add_uint32("parakeet.preprocessor.win_length", int(round(float(pre["window_size"]) * sr)))
    w.add_uint32("parakeet.preprocessor.hop_length", int(round(float(pre["window_stride"]) * sr)))
    w.add_float32("parakeet.preprocessor.preemph", 0.97)
    w.add_float32("parakeet.preprocessor.mag_power", 2.0)
    w.add_string("parakeet.preprocessor.normalize", str(pre["normalize"]))
    w.add_float32("parakeet.preprocessor.log_zero_guard", 2 ** -24)
    vocab = len(pieces)
    w.add_uint32("parakeet.vocab_size", vocab)
    w.add_uint32("parakeet.blank_id", vocab)
    w.add_array("parakeet.tokenizer.pieces", [str(x) for x in pieces])
    prednet = dec["prednet"]
    w.add_uint32("parakeet.decoder.pred_hidden", int(prednet["pred_hidden"]))
    w.add_uint32("parakeet.decoder.pred_rnn_layers", int(prednet.get("pred_rnn_layers", 1)))
    w.add_uint32("parakeet.joint.joint_hidden", int(joint["jointnet"]["joint_hidden"]))
    w.add_string("parakeet.joint.activation", str(joint["jointnet"].get("activation", "relu")))
    w.add_uint32("parakeet.decoding.max_symbols", int((decoding.get("greedy") or {}).get("max_symbols", 10)))
    if arch == "tdt":
        w.add_array("parakeet.tdt.durations", [int(x) for x in durations])
    keep = {"preprocessor.featurizer.fb", "preprocessor.featurizer.window"}
    for name, t in sd.items():
        if name.startswith("preprocessor.") and name not in keep:
            continue
        a = t.detach().cpu().float().numpy()
        if a.ndim == 0:
            continue
        a = np.ascontiguousarray(a, dtype=np.float32)
        _add(w, name, a, parakeet_cpp_type(name, list(a.shape[::-1]), dtype))
    _finish(w, extra)


def rewrite_earshot(kv, tensors, path, types, values=None):
    """A copy of an earshot-layout GGUF (read_gguf's kv and tensors) with other tensor types: the same
    weights stored as the published file stores them. values: {name: array} replacing a tensor's values."""
    arch = kv["general.architecture"][2]
    w = gguf.GGUFWriter(str(path), arch)
    for key, (vt, sub, val) in kv.items():
        if key == "general.architecture":
            continue
        w.add_key_value(key, val, vt, sub_type=sub)
    for name, (t, a) in tensors.items():
        a = np.ascontiguousarray((values or {}).get(name, a), dtype=np.float32)
        _add(w, name, a, types.get(name))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

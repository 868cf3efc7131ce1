"""scripts/convert/nemo_to_gguf.py on a random Sortformer .nemo (tests/model/reference/sortformer_nemo.py): the
GGUF's keys and tensors (earshot-sortformer, docs/sortformer-gguf.md) hold the config's values and the checkpoint's
weights under earshot's names; f16 converts the matrices only; and one refusal per config value the loader would not
compute as NeMo does. (Values through the model: tests/model/reference/sortformer_reference.py.)

  test_sortformer_converter.py
"""
import contextlib
import copy
import io
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "convert"))
sys.path.insert(0, os.path.join(ROOT, "tests", "model", "reference"))
sys.path.insert(0, os.path.join(ROOT, "third_party", "src", "llama.cpp", "gguf-py"))
import gguf  # noqa: E402
import nemo_to_gguf  # noqa: E402
import sortformer_nemo  # noqa: E402

ARCH = "earshot-sortformer"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def convert(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = nemo_to_gguf.main(args)
    return rc, err.getvalue()


def main():
    dims = sortformer_nemo.SMALL
    cfg = sortformer_nemo.config(dims)
    sd = sortformer_nemo.state_dict(dims, 4)
    with tempfile.TemporaryDirectory() as tmp:
        nemo, out = os.path.join(tmp, "s.nemo"), os.path.join(tmp, "s.gguf")
        sortformer_nemo.write_nemo(nemo, cfg, sd)
        rc, err = convert([nemo, out])
        check(rc == 0, f"conversion failed: {err}")
        r = gguf.GGUFReader(out)
        kv = {f.name: f for f in r.fields.values()}

        def value(key):
            f = kv[f"{ARCH}.{key}"]
            return bytes(f.parts[f.data[0]]).decode() if f.types[0] == gguf.GGUFValueType.STRING else \
                f.parts[f.data[0]].tolist()[0]

        check(bytes(kv["general.architecture"].parts[kv["general.architecture"].data[0]]).decode() == ARCH,
              "general.architecture")
        for key, want in (("embedding_length", dims["d"]), ("block_count", dims["n_layers"]), ("bias", True),
                          ("speakers", 4), ("transformer.block_count", dims["tf_layers"]),
                          ("transformer.embedding_length", dims["tf_d"]), ("cache.spkcache_len", 188),
                          ("cache.sil_frames_per_spk", 3), ("features.normalize", "none"),
                          ("cache.async_streaming", False)):
            check(value(key) == want, f"{key} = {value(key)!r}, expected {want!r}")
        check(abs(value("cache.weak_boost_rate") - 1.5) < 1e-6, "cache.weak_boost_rate")
        tensors = {t.name: t for t in r.tensors}
        check(all(len(n) <= 63 for n in tensors), "a tensor name over 63 bytes")
        check("sortformer_modules.hidden_to_spks.weight" not in tensors and
              not any("num_batches_tracked" in n for n in tensors), "unused tensors written")
        q = np.array(tensors["transformer.1.attn_q.weight"].data)
        check(np.array_equal(q, sd["transformer_encoder.layers.1.first_sub_layer.query_net.weight"].numpy()),
              "transformer.1.attn_q.weight is not the checkpoint's query_net")
        bias = np.array(tensors["encoder.layers.0.conv.depthwise_conv.bias"].data)
        check(np.array_equal(bias, sd["encoder.layers.0.conv.depthwise_conv.bias"].numpy()), "depthwise bias")
        rc, err = convert([nemo, out, "--type", "f16"])
        r = gguf.GGUFReader(out)
        types = {t.name: t.tensor_type for t in r.tensors}
        check(rc == 0 and types["sortformer.hidden.weight"] == gguf.GGMLQuantizationType.F16 and
              types["encoder.layers.0.feed_forward1.linear1.weight"] == gguf.GGMLQuantizationType.F16 and
              types["transformer.0.norm_1.weight"] == gguf.GGMLQuantizationType.F32 and
              types["encoder.layers.0.conv.depthwise_conv.weight"] == gguf.GGMLQuantizationType.F32,
              "--type f16: matrices f16, the rest f32")

        def refused(edit, expect, what):
            c, s = copy.deepcopy(cfg), dict(sd)
            edit(c, s)
            bad = os.path.join(tmp, "bad.nemo")
            sortformer_nemo.write_nemo(bad, c, s)
            rc, err = convert([bad, os.path.join(tmp, "bad.gguf")])
            check(rc == 2 and expect in err, f"{what}: rc {rc}, {err.strip()!r} (expected '{expect}')")

        refused(lambda c, s: c["preprocessor"].update(normalize="per_feature"), "preprocessor.normalize",
                "utterance normalisation")
        refused(lambda c, s: c["encoder"].update(att_context_size=[70, 13]), "att_context_size",
                "a limited encoder context")
        refused(lambda c, s: c["transformer_encoder"].update(pre_ln=True), "transformer_encoder.pre_ln", "pre-LN")
        refused(lambda c, s: c["transformer_encoder"].update(hidden_act="gelu"), "hidden_act", "GELU")
        refused(lambda c, s: c.update(max_num_of_spks=6), "max_num_of_spks", "six speakers")
        refused(lambda c, s: s.update({"sortformer_modules.extra.weight": s["sortformer_modules.encoder_proj.bias"]}),
                "no place in earshot's layout", "an unknown tensor")
        refused(lambda c, s: s.pop("transformer_encoder.layers.0.layer_norm_2.bias"),
                "transformer_encoder.layers.0.layer_norm_2.bias is missing", "a missing tensor")
    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("the Sortformer converter writes earshot's layout and refuses what the loader would not compute")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Checks what LlamaSession computed (a dump by earshot-llm-reference-dump) against
the numpy reference decoder: the last token's logits of every decode call and the
captured attention rows of the chosen heads over the chosen span, after a prompt,
teacher-forced single steps and a suffix removal with a re-draft.

  PYTHONPATH=third_party/src/llama.cpp/gguf-py /usr/bin/python3 \
      scripts/llm_reference/check_llama.py DUMP_DIR [--logits-tol 1e-5] [--attention-tol 2e-6]

Exit status 0 when everything agrees within the tolerances, 1 otherwise (printing
the worst differences). Needs numpy (Debian: python3-numpy).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_reference import Decoder  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--logits-tol", type=float, default=1e-5)
    ap.add_argument("--attention-tol", type=float, default=2e-6)
    args = ap.parse_args()
    meta = json.load(open(os.path.join(args.dump, "steps.json")))
    dec = Decoder(os.path.join(args.dump, "weights.gguf"))  # model.gguf's tensors, no vocabulary
    n_vocab = meta["n_vocab"]
    heads = meta["heads"]
    c0, c1 = meta["column_begin"], meta["column_end"]
    logits = np.fromfile(os.path.join(args.dump, "logits.f32"), dtype=np.float32).reshape(-1, n_vocab)
    attention = np.fromfile(os.path.join(args.dump, "attention.f32"), dtype=np.float32)
    if logits.shape[0] != len(meta["steps"]):
        print(f"{logits.shape[0]} logit rows for {len(meta['steps'])} steps")
        return 1

    sequence = []
    offset = 0
    worst_logit = worst_attention = 0.0
    failures = 0
    for i, step in enumerate(meta["steps"]):
        pos, tokens = step["position"], step["tokens"]
        sequence = sequence[:pos] + tokens  # a decode at pos forgets what followed (remove_suffix)
        ref_logits, ref_attention = dec.forward(sequence)
        d_logit = float(np.max(np.abs(ref_logits[-1] - logits[i])))
        n_cols = c1 - c0
        size = len(tokens) * len(heads) * n_cols
        got = attention[offset:offset + size].reshape(len(tokens), len(heads), n_cols)
        offset += size
        want = np.zeros_like(got, dtype=np.float64)
        for t in range(len(tokens)):
            row = pos + t
            for j, (layer, head) in enumerate(heads):
                hi = min(c1, len(sequence))
                if hi > c0:
                    want[t, j, :hi - c0] = ref_attention[layer, head, row, c0:hi]
        d_att = float(np.max(np.abs(want - got)))
        worst_logit = max(worst_logit, d_logit)
        worst_attention = max(worst_attention, d_att)
        same_argmax = int(np.argmax(ref_logits[-1])) == int(np.argmax(logits[i]))
        ok = d_logit <= args.logits_tol and d_att <= args.attention_tol and same_argmax
        failures += not ok
        print(f"step {i}: position {pos}, {len(tokens)} token(s): max |logit diff| {d_logit:.2e}, "
              f"max |attention diff| {d_att:.2e}, argmax {'agrees' if same_argmax else 'DIFFERS'}"
              f"{'' if ok else '  <-- FAIL'}")
    if offset != attention.size:
        print(f"attention dump has {attention.size} values, steps account for {offset}")
        return 1
    print(f"{meta['architecture']}: worst logit diff {worst_logit:.2e} (tol {args.logits_tol}), "
          f"worst attention diff {worst_attention:.2e} (tol {args.attention_tol}), {failures} failing step(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

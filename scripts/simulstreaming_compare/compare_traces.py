#!/usr/bin/python3
"""Compares an `earshot transcribe --trace` file with run_simulstreaming.py's,
pass by pass: prompt, content frames, committed tokens; at the first decoded
token that differs it prints both sides and earshot's frame and logit margins
(at most TIE = 1e-6: an exact tie up to float32 rounding, which rounding
decides on either side). Exit status 0 when
every pass agrees or differs only at or after an exact tie.

    python3 compare_traces.py EARSHOT.jsonl REFERENCE.jsonl"""
import json
import sys

# A margin this small is a tie up to float32 rounding (one ulp at 1.0 is 1.2e-7).
TIE = 1e-6


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def main(ours_path, ref_path):
    ours, ref = load(ours_path), load(ref_path)
    agree = ties = 0
    after_tie = False  # once a tie sent the two apart, later prompts differ too
    for o, r in zip(ours, ref):
        same = o["committed"] == r["committed"] and o["prompt"] == r["prompt"]
        agree += same
        note = ""
        if not same:
            oi = [t["id"] for t in o["tokens"]]
            ri = [t["id"] for t in r["tokens"]]
            k = next((i for i in range(min(len(oi), len(ri))) if oi[i] != ri[i] or
                      o["tokens"][i]["frame"] != r["tokens"][i]["frame"]), min(len(oi), len(ri)))
            ot = o["tokens"][k] if k < len(oi) else None
            rt = r["tokens"][k] if k < len(ri) else None
            tie = ot is not None and rt is not None and (ot["frame_margin"] <= TIE or
                                                         (ot["logit_margin"] is not None and ot["logit_margin"] <= TIE))
            after_tie = after_tie or tie
            ties += after_tie
            note = (f"{' (exact tie)' if tie else ' (after a tie)' if after_tie else ''} prompt {'same' if o['prompt'] == r['prompt'] else 'differs'};"
                    f" step {k}: earshot {ot and (ot['id'], ot['frame'], ot['frame_margin'], ot['logit_margin'])}"
                    f" ref {rt and (rt['id'], rt['frame'])}; earshot stop {o['stop']}")
        print(f"pass {o['pass']:3d} frames {o['content_frames']}/{r['content_frames']}"
              f" committed {len(o['committed'])}/{len(r['committed'])} {'ok' if same else 'DIFF'}{note}")
    n = min(len(ours), len(ref))
    print(f"{agree} of {n} passes agree, {ties} differ at or after an exact tie, {n - agree - ties} otherwise"
          f" (earshot {len(ours)}, reference {len(ref)} passes)")
    return 0 if agree + ties == n and len(ours) == len(ref) else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

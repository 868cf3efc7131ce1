#!/usr/bin/python3
"""Runs ufal's SimulStreaming AlignAtt (PaddedAlignAttWhisper) on a WAV file in
fixed chunks, greedy, and writes one JSON line per pass in the shape of
`earshot transcribe --trace` (pass, content_frames, prompt, tokens with
frames, committed), for compare_traces.py.

    python3 run_simulstreaming.py SIMULSTREAMING_CHECKOUT MODEL.en.pt AUDIO.wav OUT.jsonl [--chunk 1.0]

MODEL.en.pt comes from ggml_to_whisper_pt.py; its name must end in .en.pt for
an English-only model (SimulStreaming picks the tokenizer from the name)."""
import argparse
import json
import os
import sys
import wave

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout")
    ap.add_argument("model")
    ap.add_argument("audio")
    ap.add_argument("out")
    ap.add_argument("--chunk", type=float, default=1.0)
    ap.add_argument("--frame-threshold", type=int, default=25)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(here, "shims"))
    sys.path.insert(0, os.path.abspath(a.checkout))
    from simulstreaming.whisper.simul_whisper.config import AlignAttConfig
    from simulstreaming.whisper.simul_whisper.simul_whisper import PaddedAlignAttWhisper

    model = os.path.abspath(a.model)
    # load_model() looks the name (the file name without .pt) up in the working directory.
    os.chdir(os.path.dirname(model))
    name = os.path.basename(model)[:-3]
    if not os.path.exists(name):
        os.symlink(os.path.basename(model), name)
    cfg = AlignAttConfig(model_path=model, language="en", nonspeech_prob=1.0, audio_min_len=0.0,
                         decoder_type="greedy", beam_size=1, frame_threshold=a.frame_threshold,
                         audio_max_len=30.0, cif_ckpt_path="", never_fire=False, logdir=None,
                         segment_length=a.chunk, task="transcribe")
    torch.set_num_threads(1)
    w = PaddedAlignAttWhisper(cfg)
    with wave.open(a.audio) as f:
        assert f.getnchannels() == 1 and f.getframerate() == 16000 and f.getsampwidth() == 2
        pcm = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    step = int(a.chunk * 16000)
    passes = []

    def run(is_last):
        hyp, gen = w.infer(is_last=is_last)
        tokens = []
        for p in gen.get("progress", []) if gen else []:
            tokens.append({"id": int(p["beam_tokens"].tokens[0]), "frame": int(p["most_attended_frames"][0])})
        passes.append({"pass": len(passes), "is_last": is_last,
                       "content_frames": gen.get("frames_len") if gen else None,
                       "prompt": gen["starting_tokens"].tokens.tolist() if gen else [],
                       "tokens": tokens, "no_speech": bool(gen.get("no_speech")) if gen else False,
                       "committed": [int(t) for t in hyp]})

    for at in range(0, len(pcm), step):
        w.insert_audio(torch.from_numpy(pcm[at:at + step].copy()))
        run(False)
    run(True)
    with open(a.out, "w") as f:
        for p in passes:
            f.write(json.dumps(p) + "\n")
    print(f"{len(passes)} passes -> {a.out}")


if __name__ == "__main__":
    main()

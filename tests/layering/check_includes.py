#!/usr/bin/env python3
"""Fails when a part of src/ includes a part above it.

Data flows one way (docs/architecture.md): audio -> features -> model -> policy
-> engine -> events -> stages -> session -> protocol -> server/cli. Each part
has a rank; a file may include its own part and parts of a lower rank only.
A part not listed here is an error too, so a new folder gets a place on purpose.
And no part above model/ but engine/ and cli/ names a model family.
"""
import pathlib
import re
import sys

RANKS = {
    "common": 0,
    "audio": 1,
    "features": 1,
    "model": 2,
    "vad": 3,  # above model/: Silero loads through model/runtime (weights, devices)
    "policy": 3,
    "engine": 4,
    "events": 5,
    "stages": 6,
    "session": 7,
    "protocol": 8,
    "server": 9,
    "bench": 9,
    "cli": 10,
}
# Parts of one rank (audio and features, model and vad, server and bench) must not
# include each other either: the check below is >=, not >.
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.MULTILINE)
# Model families are reached through the engine boundary only: above model/, just
# engine/ (which wires them) and cli/ (which fills their options) name one.
FAMILIES = ("whisper", "fastconformer", "transducer", "qwen3asr")
FAMILY_INCLUDE = re.compile(r'^\s*#\s*include\s+"model/(' + "|".join(FAMILIES) + r')/', re.MULTILINE)
MAY_NAME_A_FAMILY = ("model", "engine", "cli")


def main(src: pathlib.Path) -> int:
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cpp", ".inc") or not path.is_file():
            continue
        part = path.relative_to(src).parts[0]
        if part not in RANKS:
            problems.append(f"{path}: part '{part}' has no rank in {__file__}")
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if part not in MAY_NAME_A_FAMILY:
            for family in FAMILY_INCLUDE.findall(text):
                problems.append(f"{path}: {part} includes model/{family}/ (families are behind engine/)")
        for included in INCLUDE.findall(text):
            if included == part or included not in RANKS:
                continue
            if RANKS[included] >= RANKS[part]:
                problems.append(f"{path}: {part} (rank {RANKS[part]}) includes {included}/ (rank {RANKS[included]})")
    for p in problems:
        print(p)
    print(f"{len(problems)} layering violation(s) in {src}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))

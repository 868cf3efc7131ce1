#!/usr/bin/env python3
"""Fails when a part of src/ includes a part above it.

Data flows one way (docs/architecture.md): audio -> features -> model -> policy
-> engine -> events -> stages -> session -> protocol -> server/cli. Each part
has a rank; a file may include its own part and parts of a lower rank only.
A part not listed here is an error too, so a new folder gets a place on purpose.
And a model family is named only in its own folders and the family registry:
engine/NAME/ (its Engine, settings and registration) is included only from
itself and engine/families.cpp, and the family's model folders (model/whisper/;
model/fastconformer/ and model/transducer/; model/qwen3asr/...) only from
themselves and engine/NAME/ (within model/, Sortformer's use of the FastConformer
encoder aside: SHARED_BELOW).
And a protocol is named only where it is routed: in server/, the wire formats
(protocol/NAME/) and the adapters (server/*_adapter.h) are included only by
the adapters, the upload handlers and the route table (server/routes.cpp), so
the transport and Core stay protocol-neutral.
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
# Model families: the folders that are each family's, above and below the engine
# boundary. Only the family's own folders name them, the engine folder only from
# the registry's line; the model-neutral parts of model/ (runtime/, quantize/,
# llm/, the interfaces) name none. The one sharing below the boundary is listed
# in SHARED_BELOW (Sortformer's encoder is the transducers' FastConformer).
FAMILIES = {
    "whisper": ("model/whisper", "engine/whisper"),
    "transducer": ("model/fastconformer", "model/transducer", "engine/transducer"),
    "qwen3asr": ("model/qwen3asr", "engine/qwen3asr"),
    "voxtral": ("model/voxtral", "engine/voxtral"),
}
SHARED_BELOW = {"model/sortformer": ("model/fastconformer",)}
# The one file besides a family's own that names it: the registry's line.
REGISTRY = "engine/families.cpp"
# The server's files that may name a protocol (see the docstring).
PROTOCOL_FILES = re.compile(r"^server/(routes\.cpp|[a-z_]+_adapter\.(h|cpp)|listen\.cpp|transcribe\.cpp)$")
PROTOCOL_INCLUDE = re.compile(r'^\s*#\s*include\s+"(protocol/[a-z_0-9]+/[^"]*|server/[a-z_0-9]+_adapter\.h)"', re.MULTILINE)


def protocol_problems(rel: str, text: str) -> list:
    """A protocol's headers included by a server file outside the route table's reach."""
    if not rel.startswith("server/") or PROTOCOL_FILES.match(rel):
        return []
    return [f"{rel}: includes {inc} (only the adapters, upload handlers and server/routes.cpp name a protocol)"
            for inc in PROTOCOL_INCLUDE.findall(text)]


LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+/[a-z_0-9]+)/', re.MULTILINE)


def family_problems(rel: str, part: str, text: str) -> list:
    """Includes of a family's folders from outside them (and the registry)."""
    problems = []
    for folder in LOCAL_INCLUDE.findall(text):
        for family, folders in FAMILIES.items():
            if folder not in folders:
                continue
            own = [f for f in folders if rel.startswith(f + "/")]
            engine_folder = folders[-1]
            if own or (folder == engine_folder and rel == REGISTRY):
                continue
            if any(rel.startswith(user + "/") and folder in shared for user, shared in SHARED_BELOW.items()):
                continue
            if folder.startswith("model/") and rel.startswith(engine_folder + "/"):
                continue
            problems.append(f"{rel}: includes {folder}/ (family {family}: only {', '.join(folders)}"
                            + (f" and {REGISTRY}" if folder == engine_folder else "") + " name it)")
    return problems


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
        problems.extend(f"{src}/{p}" for p in family_problems(path.relative_to(src).as_posix(), part, text))
        problems.extend(f"{src}/{p}" for p in protocol_problems(path.relative_to(src).as_posix(), text))
        for included in INCLUDE.findall(text):
            if included == part or included not in RANKS:
                continue
            if RANKS[included] >= RANKS[part]:
                problems.append(f"{path}: {part} (rank {RANKS[part]}) includes {included}/ (rank {RANKS[included]})")
    for p in problems:
        print(p)
    print(f"{len(problems)} layering violation(s) in {src}")
    return 1 if problems else 0


def self_test() -> int:
    """The family rule catches each way of naming a family from outside, and allows its own."""
    cases = {
        "cli/a.cpp": ('#include "engine/whisper/options.h"', 1),
        "engine/model_spec.h": ('#include "engine/transducer/options.h"', 1),
        "engine/transducer/registration.cpp": ('#include "model/qwen3asr/model.h"', 1),
        "stages/x/y.cpp": ('#include "model/fastconformer/model.h"', 1),
        "engine/families.cpp": ('#include "engine/qwen3asr/registration.h"', 0),
        "engine/transducer/a.cpp": ('#include "model/transducer/decoder.h"', 0),
        "model/sortformer/a.cpp": ('#include "model/fastconformer/model.h"', 0),
        "model/quantize/quantize.cpp": ('#include "model/whisper/model_format.h"', 1),
        "model/runtime/model_file.cpp": ('#include "model/fastconformer/model.h"', 1),
        "model/voxtral/model.cpp": ('#include "model/whisper/model.h"', 1),
    }
    failures = 0
    for rel, (line, want) in cases.items():
        got = len(family_problems(rel, rel.split("/")[0], line + "\n"))
        if got != want:
            print(f"self-test: {rel} with {line}: {got} problem(s), want {want}")
            failures += 1
    protocol_cases = [
        ("server/core.cpp", '#include "protocol/deepgram/messages.h"', 1),
        ("server/server.cpp", '#include "server/wlk_adapter.h"', 1),
        ("server/routes.cpp", '#include "server/deepgram_adapter.h"', 0),
        ("server/deepgram_adapter.cpp", '#include "protocol/deepgram/projection.h"', 0),
        ("server/core.cpp", '#include "protocol/target.h"', 0),
    ]
    for rel, line, want in protocol_cases:
        got = len(protocol_problems(rel, line + "\n"))
        if got != want:
            print(f"self-test: {rel} with {line}: {got} problem(s), want {want}")
            failures += 1
    total = len(cases) + len(protocol_cases)
    print(f"{total - failures}/{total} family- and protocol-rule cases as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(pathlib.Path(sys.argv[1])))

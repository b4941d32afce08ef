"""How commands name traces: one file-stem function and one scheme for telling equal labels apart.

Contract: `trace_stem("runs/x.pt.trace.json.gz") == "x"`; `unique_labels(["a", "b", "a"]) == ["a", "b", "a #2"]`.
Every command (analyze of ranks, compare, check, report, annotate) labels traces and names default output files
with these, so one trace carries the same name everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

TRACE_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace")  # stripped from the end, repeatedly, in any order
NAMELESS = "trace"  # the stem of a file named only by suffixes (".json.gz")


def trace_stem(path: str | Path) -> str:
    """The file name without trace suffixes: `eager_mlp.json.gz` → `eager_mlp`, `w.123.pt.trace.json` →
    `w.123`, `x.trace.json` → `x`; a name that is nothing but suffixes gives "trace"."""
    name = Path(path).name
    changed = True
    while changed:
        changed = False
        for suffix in TRACE_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return NAMELESS if name in TRACE_SUFFIXES or not name else name


def unique_labels(labels: Sequence[str]) -> list[str]:
    """`labels` with repeats told apart: the first keeps its label, the next get ` #2`, ` #3`, ... (skipping any
    label that is already taken), so adding a trace never renames the ones before it."""
    taken = set(labels)
    out: list[str] = []
    used: set[str] = set()
    for label in labels:
        candidate, counter = label, 2
        while candidate in used or (candidate != label and candidate in taken):
            candidate, counter = f"{label} #{counter}", counter + 1
        used.add(candidate)
        out.append(candidate)
    return out

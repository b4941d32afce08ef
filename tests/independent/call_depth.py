"""CPU call depth read from the raw JSON with the standard library only (no tracelens, no numpy): per thread,
the nesting of its complete (`ph: "X"`) CPU events (ops, annotations, runtime and driver calls). An event's
parent is the latest-starting event of its thread that started at or before it (at the same start: a longer one,
or an equal one listed first), is still running at its start and contains all of it (ending at most
`OVERHANG_US` before it: µs-rounded timestamps); so an annotation that outlives the op it was entered in (such as
`ProfilerStep#N`, entered in the optimizer step) is not taken for that op's child (docs/loading.md). Depth:
0 without a parent, else the parent's + 1. The timeline draws a CPU thread as a lane per depth, so its lanes are
the maximum depth + 1 (for traces without Python stack events, which the timeline does not draw).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

OVERHANG_US = 1.0
CPU_CATS = frozenset({"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "hip_runtime", "runtime"})


def cpu_events(path: Path) -> list[dict[str, Any]]:
    """The file's complete CPU events (categories `CPU_CATS`)."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        document = json.load(handle)
    raw = document["traceEvents"] if isinstance(document, dict) else document
    return [e for e in raw if e.get("ph") == "X" and str(e.get("cat", "")).lower() in CPU_CATS]


def depths(path: Path) -> dict[tuple[Any, Any], list[tuple[dict[str, Any], int]]]:
    """Per (pid, tid): each CPU event with its depth (0 = outermost), in start order."""
    threads: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in cpu_events(path):
        threads.setdefault((e["pid"], e["tid"]), []).append(e)
    out = {}
    for key, evs in threads.items():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        running: list[tuple[float, int]] = []  # (end, depth) of the events started so far still running
        nested = []
        for e in evs:
            start = float(e["ts"])
            end = start + float(e.get("dur", 0))
            running = [(stop, depth) for stop, depth in running if stop > start]
            parent = next((depth for stop, depth in reversed(running) if stop >= end - OVERHANG_US), -1)
            nested.append((e, parent + 1))
            running.append((end, parent + 1))
        out[key] = nested
    return out


def lanes_per_thread(path: Path) -> dict[tuple[Any, Any], int]:
    """Per (pid, tid): the maximum depth of its CPU events + 1."""
    return {key: 1 + max(depth for _, depth in nested) for key, nested in depths(path).items()}

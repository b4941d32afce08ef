"""Stdlib only: the drop in memory-bound kernel time that torch.compile realized between an eager trace and its
compiled twin, read from the raw events (independent of tracelens).

Memory-bound = every kernel that is not a GEMM (cuBLAS/cuBLASLt `nvjet`, CUTLASS, `xmma` GEMMs, split-K
reduce); a compiled attention's flash kernel replaces eager's scale + softmax and counts against them. Per step =
total over the kernels whose launch (runtime/driver call with the same correlation) lies inside a
`ProfilerStep#N` (its CPU-side annotation; the GPU-side copy is ignored), divided by the number of steps.

    python tests/realized_fusion.py traces/h200   # prints every eager/compiled pair
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|splitkreduce|cublas", re.IGNORECASE)


def memory_bound_us_per_step(path: Path) -> float:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    steps = {}
    for e in events:
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") in ("user_annotation", "cpu_op"):
            steps[e["name"]] = (e["ts"], e["ts"] + e["dur"])
    launches = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    total = 0.0
    for e in events:
        if e.get("cat") != "kernel" or GEMM.search(e["name"]):
            continue
        launched = launches.get(e["args"].get("correlation"))
        if launched is not None and any(start <= launched <= end for start, end in steps.values()):
            total += e["dur"]
    return total / len(steps)


# folders whose eager/compiled pair is no compile twin (traces/h200/dataloader/README.md: the compiled run's
# DataLoader host work changed, and its traces have no ProfilerStep to count per step by)
NOT_TWINS = ("dataloader",)


def twins(folder: Path) -> list[tuple[Path, Path]]:
    """(eager, compiled) pairs: every `*eager*` trace whose name with `compiled` for `eager` exists (outside
    `NOT_TWINS`)."""
    pairs = []
    for eager in sorted(folder.rglob("*.json.gz")):
        if "eager" in eager.name and eager.parent.name not in NOT_TWINS:
            compiled = eager.with_name(eager.name.replace("eager", "compiled"))
            if compiled.exists():
                pairs.append((eager, compiled))
    return pairs


def realized_drop_us_per_step(eager: Path, compiled: Path) -> float:
    return memory_bound_us_per_step(eager) - memory_bound_us_per_step(compiled)


if __name__ == "__main__":
    for eager, compiled in twins(Path(sys.argv[1])):
        print(f"{eager.name:36} {realized_drop_us_per_step(eager, compiled):9.1f} µs/step")

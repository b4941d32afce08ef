"""The inputs of each step's first GEMM, read from the raw Kineto JSON (json/gzip only; no tracelens code).

A kernel belongs to the ProfilerStep whose span holds the start of its launch (runtime or driver call with the
same `correlation`). A step's first GEMM is its earliest-launched kernel whose name is a GEMM library's (cuBLAS,
CUTLASS, nvjet, `*gemm*` but not FBGEMM's `fbgemm_gpu::` kernels); its op is the innermost `cpu_op` with
`Input Dims` around that launch on the launching thread. Only traces without compilation in their steps are
read (no compile-phase spans are left out here).

Run `python -m tests.independent.first_gemm_inputs TRACE` to print (step, op, Input Dims) per step.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from tests.independent.step_windows import load_events

GEMM = re.compile(r"(?<!fb)gemm|nvjet|cublas|cutlass|xmma|wgmma", re.IGNORECASE)


def first_gemm_ops(path: str) -> list[tuple[int, str, list[list[int]]]]:
    """(step number, op name, the op's Input Dims) of each ProfilerStep's first GEMM, in step order (steps
    without a GEMM left out)."""
    events = load_events(path)
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(str(e["name"]).split("#")[1]))
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") in ("user_annotation", "cpu_op")
    )
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gemm_launches = _gemm_launches(events, launches)
    out = []
    for start, end, number in steps:
        inside = [launch for launch in gemm_launches if start <= launch["ts"] < end]
        if not inside:
            continue
        op = _innermost_op(events, inside[0])
        if op is not None:
            out.append((number, str(op["name"]), op["args"]["Input Dims"]))
    return out


def _gemm_launches(events: list[dict[str, Any]], launches: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    """The launch calls of GEMM kernels, by launch time."""
    found = []
    for e in events:
        if e.get("cat") != "kernel" or not GEMM.search(str(e.get("name", ""))):
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is not None:
            found.append(launch)
    return sorted(found, key=lambda launch: launch["ts"])


def _innermost_op(events: list[dict[str, Any]], launch: dict[str, Any]) -> dict[str, Any] | None:
    around = [
        e
        for e in events
        if e.get("cat") == "cpu_op"
        and e.get("tid") == launch["tid"]
        and e.get("args", {}).get("Input Dims")
        and e["ts"] <= launch["ts"]
        and launch["ts"] + launch.get("dur", 0) <= e["ts"] + e["dur"]
    ]
    return max(around, key=lambda e: e["ts"]) if around else None


if __name__ == "__main__":
    for row in first_gemm_ops(sys.argv[1]):
        print(*row)

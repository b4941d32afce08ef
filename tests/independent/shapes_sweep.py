"""Per-shape kernel time of a shape-sweep trace, recomputed from the raw Kineto JSON (json/gzip only).

A kernel belongs to the ProfilerStep whose span holds the start of its launch (runtime call with the same
`correlation`); it is compilation's when that launch starts inside a compile-phase span (same names as
docs/shapes.md) of any thread. A step's shape: the first input of the innermost `cpu_op` with `Input Dims`
around the launch of the step's earliest-launched GEMM kernel (cuBLAS/CUTLASS/nvjet names) outside compilation.
Shares no code with tracelens.

Run `python -m tests.independent.shapes_sweep TRACE` to print (step, shape, kernel µs) per step.
"""

from __future__ import annotations

import re
import sys

from tests.independent.step_windows import load_events

COMPILE = re.compile(
    r"\(dynamo_timed\)$|^compile_fx_inner$|^_compile\.compile_inner$|^OutputGraph\.call_user_compiler$|"
    r"^fx_codegen_and_compile$|^async_compile\.wait$"
)
GEMM = re.compile(r"gemm|nvjet|cublas|cutlass|xmma|wgmma", re.IGNORECASE)


def per_step(path: str) -> list[tuple[int, tuple[int, ...] | None, float]]:
    """(step number, first GEMM input dims, kernel µs outside compilation) per ProfilerStep, in order."""
    events = load_events(path)
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(str(e["name"]).split("#")[1]))
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") in ("user_annotation", "cpu_op")
    )
    compiles = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "cpu_op" and COMPILE.search(e["name"])]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    ops_by_tid: dict[object, list[dict]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("args", {}).get("Input Dims"):
            ops_by_tid.setdefault(e["tid"], []).append(e)
    out = []
    for start, end, number in steps:
        kernel_us = 0
        first: tuple[float, dict] | None = None
        for e in events:
            if e.get("cat") != "kernel":
                continue
            launch = launches.get(e.get("args", {}).get("correlation"))
            if launch is None or not start <= launch["ts"] < end:
                continue
            if any(a <= launch["ts"] < b for a, b in compiles):
                continue
            kernel_us += e["dur"]
            if GEMM.search(e["name"]) and (first is None or launch["ts"] < first[0]):
                first = (launch["ts"], launch)
        shape = None
        if first is not None:
            launch = first[1]
            around = [
                op
                for op in ops_by_tid.get(launch["tid"], [])
                if op["ts"] <= launch["ts"] and launch["ts"] + launch.get("dur", 0) <= op["ts"] + op["dur"]
            ]
            if around:
                innermost = max(around, key=lambda op: op["ts"])
                shape = tuple(innermost["args"]["Input Dims"][0])
        out.append((number, shape, float(kernel_us)))
    return out


if __name__ == "__main__":
    for row in per_step(sys.argv[1]):
        print(*row)

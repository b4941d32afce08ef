"""Independent per-step counts of what a CUDA graph removes (stdlib only, never imports tracelens), from the raw
trace JSON: per analyzed ProfilerStep (numbers given), the median over the steps of kernel-launch calls, graph
launches, sync calls, runtime/driver µs without syncs, outermost cpu_op µs, host copies and kernels. A CPU event
belongs to the step whose range holds its start; GPU activity to the step of its launch call (correlation)."""

from __future__ import annotations

import gzip
import json
import statistics
import sys

LAUNCH = {
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelExC_v11060",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
}
API = ("cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver")


def held(o: dict, p: dict) -> bool:
    """Whether op `p` holds op `o`: another op that starts no later, ends no earlier and lasts longer."""
    return p is not o and p["ts"] <= o["ts"] and o["ts"] + o["dur"] <= p["ts"] + p["dur"] and p["dur"] > o["dur"]


def outermost(thread_ops: list[dict]) -> list[dict]:
    """The ops of one thread that no other op holds. In start order (longer first at one start) an op can only be
    held by an op still running when it starts, so each op is checked against those (every pair when an op ends
    before it starts)."""
    if any(o["dur"] < 0 for o in thread_ops):
        return [o for o in thread_ops if not any(held(o, p) for p in thread_ops)]
    out: list[dict] = []
    running: list[dict] = []
    for o in sorted(thread_ops, key=lambda o: (o["ts"], -o["dur"])):
        running = [p for p in running if p["ts"] + p["dur"] >= o["ts"]]
        if not any(held(o, p) for p in running):
            out.append(o)
        running.append(o)
    return out


def counts(path: str, steps: list[int]) -> dict[str, float]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ranges = {}
    for e in events:
        if e.get("name", "").startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
            n = int(e["name"].split("#")[1])
            lo, hi = ranges.get(n, (e["ts"], e["ts"] + e["dur"]))
            ranges[n] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))

    def step_of(ts: float) -> int | None:
        return next((n for n in steps if ranges[n][0] <= ts <= ranges[n][1]), None)

    api = [e for e in events if e.get("cat") in API]
    step_of_corr = {e["args"].get("correlation"): step_of(e["ts"]) for e in api}
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    by_tid: dict = {}
    for o in ops:
        by_tid.setdefault(o["tid"], []).append(o)

    outer = {id(o) for thread_ops in by_tid.values() for o in outermost(thread_ops)}

    per = {n: dict.fromkeys(("launch", "graph", "sync", "api_us", "op_us", "copy", "kernels"), 0.0) for n in steps}
    for e in api:
        n = step_of(e["ts"])
        if n is None:
            continue
        sync = "Synchronize" in e["name"]
        per[n]["launch"] += e["name"] in LAUNCH
        per[n]["graph"] += "GraphLaunch" in e["name"]
        per[n]["sync"] += sync
        per[n]["api_us"] += 0.0 if sync else e["dur"]
    for o in ops:
        n = step_of(o["ts"])
        if n is not None and id(o) in outer:
            per[n]["op_us"] += o["dur"]
    for e in events:
        n = step_of_corr.get(e.get("args", {}).get("correlation"))
        if n is None:
            continue
        if e.get("cat") == "kernel":
            per[n]["kernels"] += 1
        elif e.get("cat") == "gpu_memcpy" and ("HtoD" in e["name"] or "DtoH" in e["name"]):
            per[n]["copy"] += 1
    return {k: statistics.median(per[n][k] for n in steps) for k in per[steps[0]]}


if __name__ == "__main__":
    print(counts(sys.argv[1], [int(n) for n in sys.argv[2:]]))

"""Independent CUDA-graph matching from the raw trace JSON (stdlib only, never imports tracelens).

Per replayed kernel (a kernel whose correlation is a cudaGraphLaunch's): the op of the captured launch at the
same position in the most recent capture (BeginCapture..EndCapture on one thread) with as many launches."""

from __future__ import annotations

import gzip
import json
import sys

LAUNCH = ("LaunchKernel", "cuLaunchKernel")


def match(path: str) -> tuple[dict[tuple[int, str], str | None], float]:
    """(kernel (ts µs*1000, name) → op name or None, share of replayed kernel time given a captured op)."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    kernel_corr = {e["args"].get("correlation") for e in kernels}
    api = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]

    def op_of(call: dict) -> str | None:
        ext = call["args"].get("External id")
        inside = [
            o
            for o in ops
            if o["tid"] == call["tid"]
            and o["ts"] <= call["ts"] + 1
            and call["ts"] + call["dur"] <= o["ts"] + o["dur"] + 1
        ]
        same = [o for o in inside if o["args"].get("External id") == ext]
        pick = same or sorted(inside, key=lambda o: o["dur"])[:1]
        return pick[0]["name"] if pick else None

    captures = []
    for b in (e for e in api if e["name"].endswith("StreamBeginCapture")):
        ends = [
            e["ts"]
            for e in api
            if e["name"].endswith("StreamEndCapture") and e["tid"] == b["tid"] and e["ts"] >= b["ts"]
        ]
        if not ends:
            continue
        stop = min(ends)
        calls = sorted(
            (
                e
                for e in api
                if e["tid"] == b["tid"]
                and b["ts"] <= e["ts"] <= stop
                and any(n in e["name"] for n in LAUNCH)
                and e["args"].get("correlation") not in kernel_corr
            ),
            key=lambda e: e["ts"],
        )
        captures.append((stop, [op_of(c) for c in calls]))
    captures.sort(key=lambda c: c[0])
    graph_launch = {e["args"]["correlation"]: e for e in api if "GraphLaunch" in e["name"]}
    result: dict[tuple[int, str], str | None] = {}
    total = given = 0.0
    by_launch: dict[int, list[dict]] = {}
    for k in kernels:
        corr = k["args"].get("correlation")
        if corr in graph_launch:
            by_launch.setdefault(corr, []).append(k)
    for corr, ks in by_launch.items():
        ks.sort(key=lambda k: k["ts"])
        when = graph_launch[corr]["ts"]
        chosen = next((c for stop, c in reversed(captures) if stop <= when and len(c) == len(ks)), None)
        for i, k in enumerate(ks):
            name = chosen[i] if chosen else None
            result[(round(k["ts"] * 1000), k["name"])] = name
            total += k["dur"]
            given += k["dur"] if name else 0.0
    return result, (given / total if total else float("nan"))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p, f"{match(p)[1]:.3f}")

"""Independent CUDA-graph matching from the raw trace JSON (stdlib only, never imports tracelens).

Per replayed kernel (a kernel whose correlation is a cudaGraphLaunch's): the op of the captured launch at the
same position in the most recent capture (BeginCapture..EndCapture on one thread) with as many launches.
With a capture file (`--capture`): a replay no capture of its own trace explains takes the last capture of the
capture file with as many launches whose kernel names, where that file replays the capture itself, are the
replay's."""

from __future__ import annotations

import gzip
import json
import sys

LAUNCH = ("LaunchKernel", "cuLaunchKernel")


def _events(path: str) -> list[dict]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _captures(events: list[dict]) -> list[tuple[float, list[dict | None]]]:
    """(end µs, the op event of each captured launch) per capture, by end."""
    kernel_corr = {e["args"].get("correlation") for e in events if e.get("cat") == "kernel"}
    api = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]

    def op_of(call: dict) -> dict | None:
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
        return pick[0] if pick else None

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
    return captures


def _replays(events: list[dict]) -> list[tuple[float, list[dict]]]:
    """(cudaGraphLaunch ts µs, its kernels by start) per graph launch."""
    graph_launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "hip_runtime") and "GraphLaunch" in e["name"]
    }
    by_launch: dict[int, list[dict]] = {}
    for k in (e for e in events if e.get("cat") == "kernel"):
        corr = k["args"].get("correlation")
        if corr in graph_launch:
            by_launch.setdefault(corr, []).append(k)
    return [(graph_launch[c]["ts"], sorted(ks, key=lambda k: k["ts"])) for c, ks in by_launch.items()]


def _own_choice(captures: list, when: float, count: int) -> int | None:
    return next(
        (i for i in range(len(captures) - 1, -1, -1) if captures[i][0] <= when and len(captures[i][1]) == count), None
    )


def match(path: str, capture: str | None = None) -> tuple[dict[tuple[int, str], str | None], float]:
    """(kernel (ts µs*1000, name) → op name or None, share of replayed kernel time given a captured op)."""
    result, given, total, _ = match_detail(path, capture)
    return {key: (op["name"] if op else None) for key, op in result.items()}, (given / total if total else float("nan"))


def match_detail(path: str, capture: str | None = None) -> tuple[dict, float, float, float]:
    """(kernel key → op event or None, replayed kernel µs given an op, all replayed kernel µs, µs whose op has
    input shapes)."""
    events = _events(path)
    own = _captures(events)
    theirs: list = []
    names: list = []
    if capture is not None:
        other = _events(capture)
        theirs = _captures(other)
        names = [None] * len(theirs)
        for when, ks in sorted(_replays(other), key=lambda r: r[0]):
            i = _own_choice(theirs, when, len(ks))
            if i is not None and names[i] is None:
                names[i] = [k["name"] for k in ks]
    result: dict = {}
    total = given = shaped = 0.0
    for when, ks in _replays(events):
        i = _own_choice(own, when, len(ks))
        chosen = own[i][1] if i is not None else None
        if chosen is None and theirs:
            fits = [
                j
                for j, (_, c) in enumerate(theirs)
                if len(c) == len(ks) and (names[j] is None or names[j] == [k["name"] for k in ks])
            ]
            chosen = theirs[fits[-1]][1] if fits else None
        for n, k in enumerate(ks):
            op = chosen[n] if chosen else None
            result[(round(k["ts"] * 1000), k["name"])] = op
            total += k["dur"]
            given += k["dur"] if op else 0.0
            shaped += k["dur"] if op and op["args"].get("Input Dims") else 0.0
    return result, given, total, shaped


if __name__ == "__main__":
    args = sys.argv[1:]
    cap = None
    if "--capture" in args:
        i = args.index("--capture")
        cap = args[i + 1]
        args = args[:i] + args[i + 2 :]
    for p in args:
        _, given, total, shaped = match_detail(p, cap)
        print(p, f"ops {given / total:.3f}", f"shapes {shaped / total:.3f}")

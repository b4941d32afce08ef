"""Independent reference computations over raw trace events: json/gzip and plain Python only, no tracelens.

Tests compare tracelens' figures with these; nothing here may import tracelens or numpy, so a bug in the
columnar code cannot hide in both.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

NCCL = re.compile(r"^nccl.*kernel", re.IGNORECASE)


def events(path: Path) -> list[dict[str, Any]]:
    """The file's `ph: "X"` events."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        document = json.load(handle)
    raw = document["traceEvents"] if isinstance(document, dict) else document
    return [e for e in raw if e.get("ph") == "X"]


def merge(intervals: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def intersection(a: list[list[float]], b: list[list[float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def steps(evs: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(number, start µs, end µs) of each ProfilerStep#N annotation, in time order."""
    found = []
    for e in evs:
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep#"):
            found.append((int(name.split("#")[1]), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return sorted(found, key=lambda s: s[1])


def launch_times(evs: list[dict[str, Any]]) -> dict[int, float]:
    """Start (µs) of each runtime/driver call, by correlation id."""
    out = {}
    for e in evs:
        if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                out[int(corr)] = float(e["ts"])
    return out


def kernel_steps(evs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int | None]]:
    """Each kernel with the number of the ProfilerStep its launch call lies in (None: no launch or no step)."""
    launches = launch_times(evs)
    spans = steps(evs)
    out = []
    for e in evs:
        if str(e.get("cat", "")).lower() != "kernel":
            continue
        launched = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        step = None
        if launched is not None:
            for number, start, end in spans:
                if start <= launched < end:
                    step = number
        out.append((e, step))
    return out


def comm_overlap_pct(path: Path, complete_steps: set[int]) -> float | None:
    """Percent of the union of NCCL kernels launched in `complete_steps` that compute kernels (any kernel that is
    not NCCL) overlap; intervals per device."""
    by_device: dict[Any, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
    for e, step in kernel_steps(events(path)):
        device = (e.get("args") or {}).get("device")
        comm, comp = by_device.setdefault(device, ([], []))
        interval = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        if NCCL.match(e["name"]):
            if step in complete_steps:
                comm.append(interval)
        else:
            comp.append(interval)
    total = hidden = 0.0
    for comm, comp in by_device.values():
        merged = merge(comm)
        total += sum(end - start for start, end in merged)
        hidden += intersection(merged, merge(comp))
    return 100.0 * hidden / total if total else None


GRAPH_LAUNCHES = ("cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch")


def compiled_regions_and_graph_launches(path: Path) -> tuple[int, int]:
    """How many `Torch-Compiled Region` ranges and CUDA-graph launch calls start inside a ProfilerStep (anywhere
    in a trace without ProfilerSteps)."""
    evs = events(path)
    spans = steps(evs)

    def counted(e: dict[str, Any]) -> bool:
        return not spans or any(start <= float(e["ts"]) < end for _, start, end in spans)

    names = [(str(e.get("name", "")), e) for e in evs]
    regions = sum(1 for name, e in names if name.startswith("Torch-Compiled Region") and counted(e))
    launches = sum(1 for name, e in names if name in GRAPH_LAUNCHES and counted(e))
    return regions, launches


RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime")


def launches_per_step(path: Path) -> dict[int, int]:
    """Per ProfilerStep number (-1: the whole trace, where it has none): its runtime calls that launched GPU work
    (a kernel, copy or set with the call's correlation), and those named like a launch that launched nothing
    (their GPU work unrecorded) unless they were captured into a CUDA graph (between their thread's BeginCapture
    and EndCapture)."""
    evs = events(path)
    gpu_correlations = {
        int((e.get("args") or {}).get("correlation", -1))
        for e in evs
        if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")
    }
    calls = [e for e in evs if str(e.get("cat", "")).lower() in RUNTIME_CATEGORIES]
    captures: dict[Any, list[tuple[float, float]]] = {}
    for begin in (e for e in calls if str(e["name"]).endswith("StreamBeginCapture")):
        ends = [
            float(e["ts"])
            for e in calls
            if e.get("tid") == begin.get("tid")
            and str(e["name"]).endswith("StreamEndCapture")
            and e["ts"] >= begin["ts"]
        ]
        if ends:
            captures.setdefault(begin.get("tid"), []).append((float(begin["ts"]), min(ends)))
    spans = steps([e for e in evs if str(e.get("cat", "")).lower() != "gpu_user_annotation"])  # the CPU's
    spans = spans or [(-1, float("-inf"), float("inf"))]  # no ProfilerStep: the whole trace, step -1
    counts = {number: 0 for number, _, _ in spans}
    for call in calls:
        name, ts = str(call["name"]), float(call["ts"])
        launched = int((call.get("args") or {}).get("correlation", -1)) in gpu_correlations
        named = re.search(r"launch|memcpy|memset", name, re.I) is not None
        captured = any(start <= ts <= end for start, end in captures.get(call.get("tid"), []))
        if launched or (named and not captured):
            for number, start, end in spans:
                if start <= ts < end:
                    counts[number] += 1
    return counts


GPU_ACTIVITY_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def step_spans(evs: list[dict[str, Any]]) -> dict[int, tuple[float, float, float]]:
    """Per ProfilerStep (CPU-side annotations): (CPU start, span start, end) in µs, by docs/critical_path.md's
    definition read from the raw events. The step's GPU activities are those whose launch call (by correlation)
    starts inside its CPU span; its end is the later of its CPU end and their last end. On each (device, stream)
    it used, the earlier work is the other activities there (another step's, or launched before the trace) that
    started before its first one: their latest end, but not past that first start. The span starts at the later
    of the CPU start and the latest such end (never after the end)."""
    launches = launch_times(evs)
    found = steps([e for e in evs if not str(e.get("cat", "")).startswith("gpu_")])
    gpu = [e for e in evs if str(e.get("cat", "")).lower() in GPU_ACTIVITY_CATS]
    owner: list[int | None] = []
    for e in gpu:
        launched = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        if launched is None or launched > float(e["ts"]):  # no launch, or a correlation id reused by a later call
            owner.append(None)
        else:
            owner.append(next((n for n, start, end in found if start <= launched < end), None))
    out = {}
    for number, start, cpu_end in found:
        mine = [e for e, n in zip(gpu, owner, strict=True) if n == number]
        end = max([cpu_end] + [float(e["ts"]) + float(e.get("dur", 0)) for e in mine])
        earliest = start
        for lane in {_lane(e) for e in mine}:
            first = min(float(e["ts"]) for e in mine if _lane(e) == lane)
            before = [
                float(e["ts"]) + float(e.get("dur", 0))
                for e, n in zip(gpu, owner, strict=True)
                if n != number and _lane(e) == lane and float(e["ts"]) < first
            ]
            if before:
                earliest = max(earliest, min(max(before), first))
        out[number] = (start, min(earliest, end), end)
    return out


def _lane(e: dict[str, Any]) -> tuple[int, int]:
    args = e.get("args") or {}
    return int(args.get("device", 0) or 0), int(args.get("stream", 0) or 0)

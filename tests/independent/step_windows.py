"""Per-step GPU windows, busy time, step time and queue backlog, recomputed from the raw Kineto JSON.

Standard library only (json, gzip): it never imports tracelens, so a test comparing the two compares two
independent readings of the same definitions (docs/definitions.md):

- a step is a `ProfilerStep#N` span on a CPU track (cpu_op / user_annotation), or without any, an inferred step
  (tests/independent/nostep_autotune.py: the periods of a training loop's DataLoader / optimizer ranges, else
  outermost `Torch-Compiled Region` calls); GPU activity (kernel,
  gpu_memcpy, gpu_memset) belongs to the step whose span contains the start of the runtime/driver call with
  the same `correlation`;
- `gpu_end(k)` = max(CPU end of step k, end of the last GPU activity it launched, gpu_end(k-1));
- the step's GPU window is [max(CPU start of k, gpu_end(k-1)), gpu_end(k)); the first step's starts at its CPU
  start;
- busy = per device, the length of the union of all GPU activity clipped to the window (whoever launched it),
  summed over the devices that have GPU activity in the trace; idle = window x devices - busy; Inductor's
  autotuning GPU activity (nostep_autotune.autotune_launches) counts in neither;
- step time: gpu_end(k) - gpu_end(k-1) when the GPU is the limiter (gpu_end(k-1) > CPU start of k), else the
  CPU start of k+1 - CPU start of k (an inferred step: its window length, the time between calls is no
  step's); the first step of the trace (no previous step) and the last one without a next step take their
  window length;
- the first step, when GPU work that has no launch in the trace (launched before the recording) ends after its
  CPU start and starts before the first GPU activity the step launched (the queue of earlier steps): when its
  GPU end trails its CPU end, its step time runs from when that work ended to its GPU end (its CPU span may
  be longer: a first step that begins with a sync waits there for that work); and when the
  earliest GPU activity ending after the step's start is such work, its window starts at that activity's start;
- queue backlog = gpu_end(k) - CPU end of k.

Run it as `python -m tests.independent.step_windows TRACE` to print the figures.
"""

from __future__ import annotations

import gzip
import json
import sys
from decimal import Decimal
from typing import Any

from tests.independent.nostep_autotune import autotune_launches, inferred_steps, loop_marker_steps

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
CPU_STEP_CATS = {"cpu_op", "user_annotation", "Operator", "User annotation"}
CPU_SIDE_CATS = CPU_STEP_CATS | LAUNCH_CATS | {"python_function"}


def load_events(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:  # type: ignore[operator]
        document = json.load(handle, parse_float=Decimal)  # exact: µs timestamps near 1e15 lose ns as floats
    events = document["traceEvents"] if isinstance(document, dict) else document
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _ns(value: Any) -> int:
    return int((Decimal(value) * 1000).to_integral_value())


def step_figures(path: str) -> list[dict[str, float]]:
    """One dict per ProfilerStep in start order: number, cpu_start_ns, cpu_end_ns, window_start_ns,
    window_end_ns, busy_us, idle_us, step_us, backlog_us, cpu_ops (`cpu_op` events starting in the step's CPU
    span), cpu_us (that span's length)."""
    events = load_events(path)
    steps: dict[int, list[int]] = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") in CPU_STEP_CATS and name.startswith("ProfilerStep#"):
            number = int(name.split("#", 1)[1])
            start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))
            span = steps.setdefault(number, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    ordered = sorted(steps.items(), key=lambda item: item[1][0])
    if not ordered:  # no ProfilerStep: periods of a training loop's markers (DataLoader, optimizer), numbered 1, 2, ...
        ordered = [(i + 1, [start, end]) for i, (start, end) in enumerate(loop_marker_steps(events))]
    marked = bool(ordered) and not steps
    if not ordered:  # nor markers: steps inferred from outermost Torch-Compiled Region calls, numbered 1, 2, ...
        ordered = [(i + 1, [start, end]) for i, (start, end) in enumerate(inferred_steps(events))]
    inferred = bool(ordered) and not steps and not marked  # an inferred call is its step: its period ends with it
    if not ordered:  # nor such calls: one window over all CPU-side and GPU events, numbered -1
        ends = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))) for e in events if e.get("cat") in CPU_SIDE_CATS]
        gpu_spans = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0))) for e in events if e.get("cat") in GPU_CATS]
        if ends:
            start = min(s for s, _ in ends + gpu_spans)
            ordered = [(-1, [start, max(t for _, t in ends + gpu_spans)])]
    launch_ts: dict[int, int] = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {}):
            launch_ts[int(e["args"]["correlation"])] = _ns(e["ts"])
    autotune = autotune_launches(events)  # Inductor's autotuning: compile cost, in no step and not busy
    gpu = []  # (device, start, end, launch ts or None)
    for e in events:
        if e.get("cat") in GPU_CATS and int((e.get("args") or {}).get("correlation", -1)) not in autotune:
            args = e.get("args") or {}
            device = int(args.get("device", e.get("pid", 0)))
            start = _ns(e["ts"])
            gpu.append((device, start, start + _ns(e.get("dur", 0)), launch_ts.get(int(args.get("correlation", -1)))))
    last_launched_end = [None] * len(ordered)
    for _, _, end, launched in gpu:
        if launched is None:
            continue
        for i, (_, (start, stop)) in enumerate(ordered):
            if start <= launched < stop:
                last_launched_end[i] = end if last_launched_end[i] is None else max(last_launched_end[i], end)
                break
    devices = sorted({device for device, _, _, _ in gpu})
    busy_by_device = {d: _union(sorted((s, t) for dev, s, t, _ in gpu if dev == d)) for d in devices}
    op_starts = [_ns(e["ts"]) for e in events if e.get("cat") == "cpu_op"]
    rows: list[dict[str, Any]] = []
    previous_end: int | None = None
    for i, (number, (cpu_start, cpu_end)) in enumerate(ordered):
        gpu_end = max(cpu_end, last_launched_end[i] or cpu_end, previous_end if previous_end is not None else cpu_end)
        window_start = cpu_start if previous_end is None else max(cpu_start, previous_end)
        earlier_end = None
        if i == 0 and number != -1:
            own = [s for _, s, _, launched in gpu if launched is not None and cpu_start <= launched < cpu_end]
            first_own = min(own) if own else None
            earlier = [
                t
                for _, s, t, launched in gpu
                if launched is None and t > cpu_start and (first_own is None or s < first_own)
            ]
            if earlier:  # the queue of earlier steps: the window starts where it ends (or the step's own work starts)
                earlier_end = max(earlier)
                window_start = max(window_start, earlier_end if first_own is None else min(earlier_end, first_own))
        window_start = min(window_start, gpu_end)
        busy_ns = sum(_clipped(busy_by_device[d], window_start, gpu_end) for d in devices)
        window_ns = (gpu_end - window_start) * len(devices)
        gpu_limited = previous_end is not None and previous_end > cpu_start
        if gpu_limited:
            step_ns = gpu_end - previous_end  # type: ignore[operator]
        elif previous_end is not None and i + 1 < len(ordered) and not inferred:
            step_ns = ordered[i + 1][1][0] - cpu_start
        elif earlier_end is not None and gpu_end > cpu_end:  # GPU-limited by the earlier work
            step_ns = gpu_end - max(window_start, earlier_end)
        else:
            step_ns = gpu_end - cpu_start
        rows.append(
            {
                "number": number,
                "cpu_start_ns": cpu_start,
                "cpu_end_ns": cpu_end,
                "window_start_ns": window_start,
                "window_end_ns": gpu_end,
                "busy_us": busy_ns / 1000,
                "idle_us": (window_ns - busy_ns) / 1000,
                "step_us": step_ns / 1000,
                "backlog_us": (gpu_end - cpu_end) / 1000,
                "cpu_ops": sum(1 for t in op_starts if cpu_start <= t < cpu_end),
                "cpu_us": (cpu_end - cpu_start) / 1000,
            }
        )
        previous_end = gpu_end
    return rows


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _clipped(intervals: list[tuple[int, int]], low: int, high: int) -> int:
    return sum(max(0, min(end, high) - max(start, low)) for start, end in intervals)


if __name__ == "__main__":
    for row in step_figures(sys.argv[1]):
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})

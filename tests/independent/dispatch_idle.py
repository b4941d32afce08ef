"""An upper bound for exposed dispatch, recomputed from the raw Kineto JSON (json/gzip only).

Dispatch self time: every `cpu_op`, every runtime/driver call that is not a synchronisation (name matches
`Synchronize`, or a plain `cudaMemcpy`/`hipMemcpy`) and every torch.compile wrapper annotation, minus the time its
direct children cover — children are the events on the same thread nested inside it, of any category, so Python
frames (`python_function`) nested in an op are not dispatch. Its union over threads, intersected with the GPU's
idle time (per device: not covered by any kernel/memcpy/memset) inside the steps' GPU windows
(tests/independent/step_windows.py), bounds the exposed dispatch from above: exposed dispatch is the part of it in
launch waits, a subset of idle time.

Run `python -m tests.independent.dispatch_idle TRACE` to print µs per step.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from tests.independent.step_windows import GPU_CATS, LAUNCH_CATS, _ns, _union, load_events, step_figures

SYNC = re.compile(r"Synchronize|^(cuda|hip)Memcpy$|^cuMemcpy(DtoH|HtoD)?$")
COMPILE_WRAPPER = re.compile(
    r"^## Call CompiledFxGraph|Guard|guard|^Torch-Compiled Region|^CompiledFunction|^TorchDynamo"
)
CPU_SIDE = {"cpu_op", "user_annotation", "python_function", *LAUNCH_CATS}


def _self_pieces(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Self-time pieces of the dispatch events among `events` (one thread's CPU-side events)."""
    spans = sorted(
        ((_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), e) for e in events), key=lambda s: (s[0], -s[1])
    )
    pieces: list[tuple[int, int]] = []
    stack: list[list[Any]] = []  # [start, end, is_dispatch, cursor]

    def close(frame: list[Any]) -> None:
        if frame[2] and frame[1] > frame[3]:
            pieces.append((frame[3], frame[1]))

    for start, end, event in spans:
        while stack and start >= stack[-1][1]:
            close(stack.pop())
        if stack:
            parent = stack[-1]
            if parent[2] and start > parent[3]:
                pieces.append((parent[3], min(start, parent[1])))
            parent[3] = max(parent[3], min(end, parent[1]))
        cat, name = event.get("cat"), str(event.get("name", ""))
        dispatch = (
            cat == "cpu_op"
            or (cat in LAUNCH_CATS and not SYNC.search(name))
            or (cat == "user_annotation" and bool(COMPILE_WRAPPER.search(name)))  # torch.compile wrappers
        )
        stack.append([start, end, dispatch, start])
    while stack:
        close(stack.pop())
    return pieces


def idle_dispatch_us(path: str) -> dict[int, float]:
    """Per step number: µs of dispatch self time (union over threads) while the GPU was idle in the step's
    GPU window, summed over devices."""
    events = load_events(path)
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") in CPU_SIDE and not str(e.get("name", "")).startswith("ProfilerStep#"):
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    pieces = []
    for thread_events in by_thread.values():
        pieces += _self_pieces(thread_events)
    dispatch = _union(sorted(pieces))
    devices: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        if e.get("cat") in GPU_CATS:
            device = int((e.get("args") or {}).get("device", e.get("pid", 0)))
            start = _ns(e["ts"])
            devices.setdefault(device, []).append((start, start + _ns(e.get("dur", 0))))
    result = {}
    for row in step_figures(path):
        low, high = int(row["window_start_ns"]), int(row["window_end_ns"])
        total = 0
        for intervals in devices.values():
            idle = _complement(_union(sorted(intervals)), low, high)
            total += _overlap(idle, dispatch)
        result[int(row["number"])] = total / 1000
    return result


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Total length of the intersection of two sorted, disjoint interval lists (one merge walk)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _complement(busy: list[tuple[int, int]], low: int, high: int) -> list[tuple[int, int]]:
    idle, cursor = [], low
    for start, end in busy:
        if end <= low or start >= high:
            continue
        if start > cursor:
            idle.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < high:
        idle.append((cursor, high))
    return idle


if __name__ == "__main__":
    for number, us in idle_dispatch_us(sys.argv[1]).items():
        print(number, round(us, 3))

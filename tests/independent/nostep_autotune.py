"""Inferred steps and Inductor's autotuning, recomputed from the raw Kineto JSON (docs/definitions.md#inferred-steps,
docs/definitions.md#autotuning).

Standard library only (json, gzip, re): it never imports tracelens. Its own reading of the definitions:

- nesting: on each CPU thread (pid, tid), a cpu_op / user_annotation / runtime / driver event lies inside every
  cpu_op or user_annotation that starts at or before it and ends at or after its start + duration (events
  sorted by start, longer first; a stack of open ranges);
- autotuning: a runtime/driver call inside (or being) a range named as Inductor names its benchmarking
  (`mm_template_autotuning`, `CachingAutotuner.benchmark_all_configs`, `CachingAutotuner.coordinate_descent_tuning`,
  `benchmark_fused_nodes`, `benchmark_codegened_module`, each with or without ` (dynamo_timed)`, or
  `Placeholder.DESCRIPTIVE_NAME`); the GPU activity with its `correlation` is autotuning; an autotuning kernel
  whose innermost enclosing cpu_op is `aten::fill_` is an L2-flush fill;
- inferred steps (only when no `ProfilerStep#N` is in the trace): each `Torch-Compiled Region: f/r` cpu_op /
  user_annotation of positive duration that no other such call on its thread encloses; at least two, else none.
  A kernel belongs to the step whose span holds its launch's start, unless it is autotuning.

Run it as `python -m tests.independent.nostep_autotune TRACE` to print the figures.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import sys
from decimal import Decimal
from typing import Any

RANGE_CATS = {"cpu_op", "user_annotation"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
AUTOTUNE = re.compile(
    r"^(mm_template_autotuning|CachingAutotuner\.benchmark_all_configs|CachingAutotuner\.coordinate_descent_tuning"
    r"|benchmark_fused_nodes|benchmark_codegened_module)( \(dynamo_timed\))?$|^Placeholder\.DESCRIPTIVE_NAME$"
)
REGION = re.compile(r"^Torch-Compiled Region: \d+/\d+$")


def load_events(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:  # type: ignore[operator]
        document = json.load(handle, parse_float=Decimal)
    events = document["traceEvents"] if isinstance(document, dict) else document
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]


def _ns(value: Any) -> int:
    return int((Decimal(value) * 1000).to_integral_value())


def autotune_launches(events: list[dict[str, Any]]) -> dict[int, bool]:
    """{correlation of an autotuning runtime/driver call: whether its innermost enclosing cpu_op is aten::fill_}."""
    threads: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") in RANGE_CATS | LAUNCH_CATS:
            threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    found: dict[int, bool] = {}
    for rows in threads.values():
        rows.sort(key=lambda e: (_ns(e["ts"]), -_ns(e.get("dur", 0))))
        stack: list[tuple[int, str, str]] = []  # (end ns, name, cat) of the open ranges
        for e in rows:
            start = _ns(e["ts"])
            end = start + _ns(e.get("dur", 0))
            while stack and stack[-1][0] < end:
                stack.pop()
            if e.get("cat") in LAUNCH_CATS:
                correlation = (e.get("args") or {}).get("correlation")
                if correlation is not None and any(AUTOTUNE.match(name) for _, name, _ in stack):
                    innermost_op = next((name for _, name, cat in reversed(stack) if cat == "cpu_op"), None)
                    found[int(correlation)] = innermost_op == "aten::fill_"
                continue
            stack.append((end, str(e.get("name", "")), str(e.get("cat"))))
    return found


def inferred_steps(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """[(start ns, end ns)] of the inferred steps in start order; [] when the trace has ProfilerSteps or fewer
    than two outermost Torch-Compiled Region calls. Where the outermost calls come from several frames (the `f` of
    `f/r`), the periods between the calls of the frame called most (of those, the first called), when it is called
    at least three times."""
    if any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events if e.get("cat") in RANGE_CATS):
        return []
    calls: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}
    for e in events:
        if e.get("cat") in RANGE_CATS and REGION.match(str(e.get("name", ""))) and _ns(e.get("dur", 0)) > 0:
            start = _ns(e["ts"])
            frame = str(e["name"]).rsplit(" ", 1)[1].split("/")[0]
            calls.setdefault((e.get("pid"), e.get("tid")), []).append((start, start + _ns(e["dur"]), frame))
    steps = []
    for spans in calls.values():
        reach = None
        for start, end, frame in sorted(spans, key=lambda s: (s[0], -s[1])):
            if reach is None or start >= reach:
                steps.append((start, end, frame))
                reach = end
    steps.sort()
    if len(steps) < 2:
        return []
    frames = [frame for _, _, frame in steps]
    if len(set(frames)) > 1:
        loop = max(dict.fromkeys(frames), key=frames.count)  # the most called; of those, the first called
        starts = sorted({start for start, _, frame in steps if frame == loop})
        return list(itertools.pairwise(starts)) if len(starts) >= 3 else []
    return [(start, end) for start, end, _ in steps]


LOOP_MARKERS = ("enumerate(DataLoader)#", "Optimizer.zero_grad#", "Optimizer.step#")


def loop_marker_steps(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Without ProfilerSteps and compiled calls: [(start ns, end ns)] of the periods of the first loop marker
    (in `LOOP_MARKERS` order) with at least 3 user_annotation calls on one thread (the thread with the most):
    each from a call's start to the next call's start; [] when none repeats."""
    if any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events if e.get("cat") in RANGE_CATS):
        return []
    for marker in LOOP_MARKERS:
        starts: dict[tuple[Any, Any], set[int]] = {}
        for e in events:
            if e.get("cat") in ("user_annotation", "User annotation") and str(e.get("name", "")).startswith(marker):
                starts.setdefault((e.get("pid"), e.get("tid")), set()).add(_ns(e["ts"]))
        if not starts:
            continue
        best = sorted(max(starts.values(), key=len))
        if len(best) >= 3:
            return list(itertools.pairwise(best))
    return []


def figures(path: str) -> dict[str, Any]:
    """Autotuning counts (kernels, fills, other GPU activities, GPU µs, fill µs), the inferred steps and the
    kernels each step launched outside autotuning."""
    events = load_events(path)
    autotune = autotune_launches(events)
    steps = loop_marker_steps(events) or inferred_steps(events)  # a loop's markers first, then compiled calls
    launch_ts = {
        int(e["args"]["correlation"]): _ns(e["ts"])
        for e in events
        if e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {})
    }
    out = {"kernels": 0, "fills": 0, "other": 0, "gpu_ns": 0, "fill_ns": 0, "steps": steps}
    per_step = [0] * len(steps)
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        correlation = int((e.get("args") or {}).get("correlation", -1))
        duration = _ns(e.get("dur", 0))
        if correlation in autotune:
            out["gpu_ns"] += duration
            if e["cat"] == "kernel":
                out["kernels"] += 1
                if autotune[correlation]:
                    out["fills"] += 1
                    out["fill_ns"] += duration
            else:
                out["other"] += 1
        elif e["cat"] == "kernel" and correlation in launch_ts:
            at = launch_ts[correlation]
            for i, (start, end) in enumerate(steps):
                if start <= at < end:
                    per_step[i] += 1
                    break
    out["kernels_per_step"] = per_step
    return out


if __name__ == "__main__":
    print(figures(sys.argv[1]))

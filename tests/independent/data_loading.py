"""The DataLoader's next-batch time per step, from the raw events (standard library only): per step, the time
inside the union of every thread's `enumerate(DataLoader)#` user annotations within the step's CPU range (the
ProfilerStep range, or without ProfilerSteps the loop-marker period: tests/independent/nostep_autotune.py)."""

from __future__ import annotations

import sys
from typing import Any

from tests.independent.nostep_autotune import load_events, loop_marker_steps

PREFIX = "enumerate(DataLoader)#"


def _ns(value: Any) -> int:
    return round(float(value) * 1000)


def step_ranges(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """[(start ns, end ns)] of the CPU ProfilerStep ranges, else the loop-marker periods."""
    steps = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in events
        if e.get("cat") in ("user_annotation", "cpu_op") and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    return steps or loop_marker_steps(events)


def loader_ranges(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The DataLoader annotations' (start, end) ns, every thread, merged where they overlap."""
    raw = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in events
        if e.get("cat") in ("user_annotation", "User annotation") and str(e.get("name", "")).startswith(PREFIX)
    )
    merged: list[list[int]] = []
    for lo, hi in raw:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def per_step_us(path: str) -> list[float]:
    """The DataLoader time inside each step's CPU range, µs, in step order."""
    events = load_events(path)
    loader = loader_ranges(events)
    steps = step_ranges(events)
    return [sum(max(0, min(hi, end) - max(lo, start)) for lo, hi in loader) / 1000 for start, end in steps]


if __name__ == "__main__":
    print(per_step_us(sys.argv[1]))

"""Profiler-free timings a recording wrote into the trace's top-level metadata → `model.ProfilerFreeTiming`.

Accepted keys (docs/record.md#metadata; raw JSON stays in the loader):
- `tracelens_record` (written by `tracelens record`, version 1): `profiler_free.median_step_us` over
  `profiler_free.steps` steps timed with `profiler_free.clock` ("cuda_events" or "wall_clock") just before the
  profiled window; `partial_reason` when the window was cut short.

Not accepted, on purpose: `audit_run.timings` (the audit traces, workloads/audit_traces.py) and `tracelens_run`
(the study's workloads): the audit's CUDA events were recorded around the profiled steps, with the profiler
running, so they are profiled times; `tracelens_run` carries no timings (the study's profiler-free timings
are the `timings.json` files beside the traces, which the profiler-overhead calibration reads:
docs/profiler_overhead.md).
"""

from __future__ import annotations

import math
from typing import Any

from tracelens.model.trace import ProfilerFreeTiming

RECORD_KEY = "tracelens_record"
CLOCKS = ("cuda_events", "wall_clock")


def profiler_free_of(metadata: dict[str, Any]) -> ProfilerFreeTiming | None:
    """The measured profiler-free step time the metadata carries, or None (absent, or not usable: a median that
    is not a finite number > 0, fewer than one step, an unknown clock)."""
    record = metadata.get(RECORD_KEY)
    if not isinstance(record, dict):
        return None
    free = record.get("profiler_free")
    if not isinstance(free, dict):
        return None
    median, steps, clock = free.get("median_step_us"), free.get("steps"), free.get("clock")
    if isinstance(median, bool) or not isinstance(median, int | float) or not math.isfinite(median) or median <= 0:
        return None
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1 or clock not in CLOCKS:
        return None
    reason = record.get("partial_reason")
    return ProfilerFreeTiming(
        step_us=float(median),
        steps=steps,
        clock=str(clock),
        key=RECORD_KEY,
        partial_reason=str(reason) if isinstance(reason, str) and reason else None,
    )

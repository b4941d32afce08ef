"""Idle time per GPU stream, split the way HolisticTraceAnalysis splits it (host wait, kernel wait, other).

Contract: `analyze_stream_idle(ctx) -> StreamIdle` over the analyzed steps less those that compiled
(`ctx.steady_steps`, the summary's steps: one busy figure per stream per window, named in `window`); pure.
`stream_idle_of(trace, window)` is the same for any window.

Per (device, stream), over the GPU activity (kernels, memcpy, memset) launched in the analyzed steps, in start
order, each activity after the first has a *gap*: its start minus the previous activity's end on that stream
(negative gaps, from overlapping records, count as 0). A gap is
- `host_wait` when the activity's launch call started after the previous activity ended: the CPU had not yet
  asked for the work when the stream ran dry;
- `kernel_wait` otherwise, when the gap is shorter than `KERNEL_WAIT_NS` (30 µs, HTA's default
  `consecutive_kernel_delay`): the ordinary delay between back-to-back queued work;
- `other` otherwise: the work was queued but waited on something else (an event from another stream, a sync).
Activity without a launch call in the trace can't be host_wait. `busy_us` is the union of the stream's activity;
`span_us` runs from its first start to its last end, so `busy_us + idle_us` ≥ `span_us` only where activity
overlaps on one stream. Figures are per step (totals over the analyzed steps divided by their number).
This is per stream; `bound` answers the same question for the whole GPU (all streams merged) per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.activity import gpu_activity
from tracelens.analyses.intervals import union
from tracelens.analyses.window import Window, step_mask
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

KERNEL_WAIT_NS = 30_000
STREAMS_SHOWN = 8  # the text and the report show the first this many streams of `StreamIdle.streams`


class StreamIdleRow(msgspec.Struct, frozen=True):
    device: int
    stream: int
    activities_per_step: float
    busy_us_per_step: float
    idle_us_per_step: float
    host_wait_us_per_step: float
    kernel_wait_us_per_step: float
    other_us_per_step: float
    busy_pct: float | None  # busy / (busy + idle); None when the stream has a single activity


class StreamIdle(msgspec.Struct, frozen=True):
    streams: list[StreamIdleRow]  # busiest first
    kernel_wait_threshold_us: float
    note: str
    # the steps the figures are over, e.g. "steps 3-5 (2 warm-up steps left out: compiling or capturing)"
    window: str = ""


def analyze_stream_idle(ctx: AnalysisContext) -> StreamIdle:
    """Idle time per stream over the analyzed steps (see the module docstring)."""
    result = stream_idle_of(ctx.trace, ctx.steady_steps)
    dropped = len(ctx.window.step_numbers) - len(ctx.steady_steps.step_numbers)
    suffix = (
        f" ({dropped} warm-up step{'s' if dropped != 1 else ''} left out: compiling or capturing)" if dropped else ""
    )
    return msgspec.structs.replace(result, window=result.window + suffix)


def stream_idle_of(trace: Trace, window: Window) -> StreamIdle:
    """`analyze_stream_idle` for any window."""
    activity = gpu_activity(trace)
    picked = activity.subset(step_mask(activity.step, window.step_indices))
    launch_ts = np.where(picked.launch >= 0, trace.events.ts_ns[np.maximum(picked.launch, 0)], -1)
    end_ns = picked.ts_ns + picked.dur_ns
    n_steps = max(window.n_steps, 1)
    rows: list[StreamIdleRow] = []
    key = picked.device * (int(picked.stream.max(initial=0)) + 2) + (picked.stream + 1)
    for k in distinct_ints(key).tolist():
        on = np.flatnonzero(key == k)
        on = on[np.lexsort((end_ns[on], picked.ts_ns[on]))]
        start, end, launched = picked.ts_ns[on], end_ns[on], launch_ts[on]
        previous_end = np.maximum.accumulate(end)[:-1]
        gap = np.maximum(start[1:] - previous_end, 0)
        host = (launched[1:] >= 0) & (launched[1:] > previous_end)
        kernel = ~host & (gap < KERNEL_WAIT_NS)
        merged = union(start, end)
        busy = float((merged[:, 1] - merged[:, 0]).sum())
        idle = float(gap.sum())
        rows.append(
            StreamIdleRow(
                device=int(picked.device[on[0]]),
                stream=int(picked.stream[on[0]]),
                activities_per_step=float(_r(on.size / n_steps) or 0.0),
                busy_us_per_step=float(_r(busy / NS_PER_US / n_steps) or 0.0),
                idle_us_per_step=float(_r(idle / NS_PER_US / n_steps) or 0.0),
                host_wait_us_per_step=float(_r(float(gap[host].sum()) / NS_PER_US / n_steps) or 0.0),
                kernel_wait_us_per_step=float(_r(float(gap[kernel].sum()) / NS_PER_US / n_steps) or 0.0),
                other_us_per_step=float(_r(float(gap[~host & ~kernel].sum()) / NS_PER_US / n_steps) or 0.0),
                busy_pct=_r(100.0 * busy / (busy + idle)) if on.size > 1 and busy + idle > 0 else None,
            )
        )
    rows.sort(key=lambda r: (-r.busy_us_per_step, r.device, r.stream))
    if rows:
        note = f"{len(rows)} streams over {window.n_steps} steps"
    elif window.n_steps == 0:
        note = "no analyzed step"
    else:
        note = "no GPU activity launched in the analyzed steps"
    return StreamIdle(
        streams=rows, kernel_wait_threshold_us=KERNEL_WAIT_NS / NS_PER_US, note=note, window=_steps_label(window)
    )


def _steps_label(window: Window) -> str:
    numbers = sorted(window.step_numbers)
    if not numbers:
        return "no step"
    if numbers == [-1]:
        return "the whole trace (no ProfilerStep)"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"step {numbers[0]}" if len(numbers) == 1 else f"steps {numbers[0]}-{numbers[-1]}"
    return "steps " + ", ".join(map(str, numbers))


def _r(value: float | None) -> float | None:
    """Figures are reported to 3 decimals (ns for µs)."""
    return None if value is None else round(float(value), 3)

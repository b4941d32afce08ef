"""Exposed vs hidden: why the GPU idles inside each step, and whether the window is CPU- or GPU-bound.

Contract: `analyze_bound(trace, window, dispatch_us_per_step) -> Bound`; pure.

Per device, GPU activity (kernels, copies, memsets on all streams) is merged into busy intervals. Each idle gap
ends at the activity that starts the next busy interval and belongs to that activity's step. Its cause:
- `sync`: a synchronisation or blocking host copy on the CPU overlapped the gap (the CPU could not run ahead);
- `launch`: the activity's launch was issued after the GPU went idle and the activity started within
  `LAUNCH_SLACK_NS` of the launch call returning: the GPU waited for the CPU to dispatch it (exposed dispatch);
- `other`: nothing runnable was queued for another reason (cross-stream waits, work issued long before, no launch).
Verdict: "cpu" when launch waits exceed GPU busy time; "gpu" when launch waits are under
`GPU_BOUND_MAX_LAUNCH_WAIT` of the GPU span and the GPU is busy at least `GPU_BOUND_MIN_BUSY` of it; else "mixed".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelens.analyses.dispatch import LAYERS, classify_layers
from tracelens.analyses.window import Window
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS
from tracelens.model.trace import Trace

NS_PER_US = 1000.0
LAUNCH_SLACK_NS = 10_000
GPU_BOUND_MAX_LAUNCH_WAIT = 0.10
GPU_BOUND_MIN_BUSY = 0.50
CAUSES = ("launch", "sync", "other")


@dataclass(frozen=True)
class StepBound:
    number: int
    gpu_busy_us: float
    launch_wait_us: float
    sync_wait_us: float
    other_idle_us: float
    bound: str

    @property
    def idle_us(self) -> float:
        return self.launch_wait_us + self.sync_wait_us + self.other_idle_us


@dataclass(frozen=True)
class Bound:
    """Per-step means over the analyzed window (busy and idle summed over devices)."""

    bound: str  # "cpu" | "gpu" | "mixed" | "unknown" (no GPU activity)
    gpu_busy_us_per_step: float
    launch_wait_us_per_step: float
    sync_wait_us_per_step: float
    other_idle_us_per_step: float
    dispatch_us_per_step: float
    exposed_dispatch_us_per_step: float  # == launch waits: dispatch time the GPU actually waited for
    exposed_dispatch_pct: float | None
    gaps_per_step: float
    steps: list[StepBound]


def gap_table(trace: Trace, by: str = "device") -> pd.DataFrame:
    """Every idle gap between busy intervals of GPU activity, grouped by "device" or "stream".

    Columns: group, row (activity ending the gap), step, gap_start_ns, gap_end_ns, launch_ts_ns, launch_end_ns,
    busy_ns (that activity's contribution to the busy union, for every activity, gap or not).
    """
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(np.isin(ev.kind, np.array(GPU_ACTIVITY_KINDS, np.int8)))
    group = (ev.device[rows] if by == "device" else ev.device[rows] * 1_000_003 + ev.stream[rows]).astype(np.int64)
    order = np.lexsort((ev.ts_ns[rows], group))
    rows, group = rows[order], group[order]
    start, end = ev.ts_ns[rows], ev.end_ns[rows]
    prev_end = _previous_running_max(group, end)
    has_prev = prev_end > np.iinfo(np.int64).min // 2
    busy = np.maximum(0, end - np.maximum(start, np.where(has_prev, prev_end, start)))
    launch = links.launch[rows]
    safe = np.maximum(launch, 0)
    return pd.DataFrame(
        {
            "group": group,
            "row": rows,
            "step": links.step[rows],
            "gap_start_ns": np.where(has_prev, prev_end, start),
            "gap_end_ns": start,
            "launch_ts_ns": np.where(launch >= 0, ev.ts_ns[safe], -1),
            "launch_end_ns": np.where(launch >= 0, ev.end_ns[safe], -1),
            "busy_ns": busy,
        }
    )


def _previous_running_max(group: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For rows sorted by (group, start): the max end of earlier rows in the same group (very negative if none)."""
    missing = np.iinfo(np.int64).min // 2
    if group.size == 0:
        return np.zeros(0, dtype=np.int64)
    span = int(end.max()) - int(min(0, end.min())) + 1
    offset = (group - group.min()) * 2 * span
    running = np.maximum.accumulate(end + offset) - offset
    previous = np.full(group.size, missing, dtype=np.int64)
    previous[1:] = running[:-1]
    first = np.ones(group.size, dtype=bool)
    first[1:] = group[1:] != group[:-1]
    previous[first] = missing
    return previous


def classify_gaps(trace: Trace, gaps: pd.DataFrame) -> np.ndarray:
    """Cause index (into CAUSES) of each gap row (rows without a gap get "other" and length 0)."""
    length = (gaps["gap_end_ns"] - gaps["gap_start_ns"]).to_numpy()
    start, end = gaps["gap_start_ns"].to_numpy(), gaps["gap_end_ns"].to_numpy()
    launch_ts, launch_end = gaps["launch_ts_ns"].to_numpy(), gaps["launch_end_ns"].to_numpy()
    cause = np.full(length.size, CAUSES.index("other"), dtype=np.int8)
    waited_for_launch = (launch_ts >= 0) & (launch_ts >= start) & (end <= launch_end + LAUNCH_SLACK_NS)
    cause[waited_for_launch] = CAUSES.index("launch")
    cause[_overlaps_sync(trace, start, end)] = CAUSES.index("sync")
    cause[length <= 0] = CAUSES.index("other")
    return cause


def _overlaps_sync(trace: Trace, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    ev = trace.events
    layer = classify_layers(trace)
    sync = np.flatnonzero(np.isin(ev.kind, np.array(API_KINDS, np.int8)) & (layer == LAYERS.index("sync")))
    if sync.size == 0:
        return np.zeros(start.size, dtype=bool)
    order = np.argsort(ev.end_ns[sync], kind="stable")
    sync_end, sync_start = ev.end_ns[sync][order], ev.ts_ns[sync][order]
    # latest-starting sync among those ending at or after the gap start
    suffix_min_start = np.minimum.accumulate(sync_start[::-1])[::-1]
    first = np.searchsorted(sync_end, start, side="left")
    inside = first < sync_end.size
    hit = np.zeros(start.size, dtype=bool)
    hit[inside] = suffix_min_start[first[inside]] < end[inside]
    return hit


def analyze_bound(trace: Trace, window: Window, dispatch_us_per_step: float) -> Bound:
    gaps = gap_table(trace, by="device")
    gaps = gaps[window.in_window[gaps["row"].to_numpy()]] if len(gaps) else gaps
    n = max(window.n_steps, 1)
    if gaps.empty:
        return Bound("unknown", 0.0, 0.0, 0.0, 0.0, _r(dispatch_us_per_step), 0.0, None, 0.0, [])
    cause = classify_gaps(trace, gaps)
    length_us = np.maximum(0, (gaps["gap_end_ns"] - gaps["gap_start_ns"]).to_numpy()) / NS_PER_US
    busy_us = gaps["busy_ns"].to_numpy() / NS_PER_US
    lookup = np.full(len(trace.steps), -1, dtype=np.int64)
    lookup[window.step_indices] = np.arange(window.n_steps)
    slot = lookup[gaps["step"].to_numpy()]
    grid = np.zeros((window.n_steps, len(CAUSES) + 1))
    np.add.at(grid, (slot, cause), length_us)
    np.add.at(grid[:, len(CAUSES)], slot, busy_us)
    steps = [
        StepBound(int(num), _r(g[3]), _r(g[0]), _r(g[1]), _r(g[2]), verdict(g[3], g[0], g[1] + g[2]))
        for num, g in zip(window.step_numbers, grid, strict=True)
    ]
    total = grid.sum(axis=0) / n
    exposed = float(total[0])
    return Bound(
        bound=verdict(total[3], total[0], total[1] + total[2]),
        gpu_busy_us_per_step=_r(total[3]),
        launch_wait_us_per_step=_r(total[0]),
        sync_wait_us_per_step=_r(total[1]),
        other_idle_us_per_step=_r(total[2]),
        dispatch_us_per_step=_r(dispatch_us_per_step),
        exposed_dispatch_us_per_step=_r(exposed),
        exposed_dispatch_pct=_r(100 * exposed / dispatch_us_per_step) if dispatch_us_per_step > 0 else None,
        gaps_per_step=_r(np.count_nonzero(length_us > 0) / n),
        steps=steps,
    )


def verdict(busy_us: float, launch_wait_us: float, other_idle_us: float) -> str:
    span = busy_us + launch_wait_us + other_idle_us
    if span <= 0:
        return "unknown"
    if launch_wait_us > busy_us:
        return "cpu"
    if launch_wait_us <= GPU_BOUND_MAX_LAUNCH_WAIT * span and busy_us >= GPU_BOUND_MIN_BUSY * span:
        return "gpu"
    return "mixed"


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)

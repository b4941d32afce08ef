"""Exposed vs hidden: why the GPU idles inside each step, and whether the window is CPU- or GPU-bound.

Contract: `bound_of(trace, window, dispatch_us_per_step) -> Bound`; pure.

Per device, GPU activity (kernels, copies, memsets on all streams) is merged into busy intervals. Each idle gap
ends at the activity that starts the next busy interval and belongs to that activity's step. Its cause:
- `sync`: until the CPU returned from a synchronisation or blocking host copy that overlapped the gap;
- `launch`: the rest, when the activity's launch call returned after that point and the activity started within
  `LAUNCH_SLACK_NS` of the call returning: the GPU waited for the CPU to dispatch it (exposed dispatch);
- `other`: the rest otherwise: work was queued but waited (cross-stream events), or no launch is recorded.
Verdict: "cpu" when launch waits exceed GPU busy time; "gpu" when the GPU is busy at least `GPU_BOUND_MIN_BUSY`
of its span (busy + idle); else "mixed".
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from tracelens.analyses.dispatch import LAYERS, classify_layers
from tracelens.analyses.window import Window, merge_intervals
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, I64, kind_mask
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    import pandas as pd

    from tracelens.analyses.context import AnalysisContext

LAUNCH_SLACK_NS = 10_000
GPU_BOUND_MIN_BUSY = 0.75
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
    exposed_dispatch_us_per_step: float  # dispatch work done while the GPU waited for a launch
    exposed_dispatch_pct: float | None  # of the dispatch time
    exposed_dispatch_pct_of_gpu: float | None  # of the GPU's time in the steps (busy + idle)
    gaps_per_step: float
    steps: list[StepBound]


@dataclass(frozen=True)
class Gaps:
    """Numpy core of `gap_table`: one entry per GPU activity, sorted by (group, start); columns as there."""

    group: I64
    row: I64
    step: I32
    gap_start_ns: I64
    gap_end_ns: I64
    launch_ts_ns: I64
    launch_end_ns: I64
    busy_ns: I64

    def __len__(self) -> int:
        return int(self.row.size)

    def take(self, index: np.ndarray) -> Gaps:
        """The entries at `index` (a boolean mask or positions), in that order."""
        return Gaps(*(getattr(self, f.name)[index] for f in fields(self)))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def of(cls, gaps: Gaps | pd.DataFrame) -> Gaps:
        """`gaps` itself, or the arrays of a `gap_table` frame (possibly filtered)."""
        if isinstance(gaps, Gaps):
            return gaps
        return cls(*(gaps[f.name].to_numpy() for f in fields(cls)))


def gap_arrays(trace: Trace, by: str = "device") -> Gaps:
    """Every idle gap between busy intervals of GPU activity, grouped by "device" or "stream".

    Columns: group, row (activity ending the gap), step, gap_start_ns, gap_end_ns, launch_ts_ns, launch_end_ns,
    busy_ns (that activity's contribution to the busy union, for every activity, gap or not).
    """
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(kind_mask(ev.kind, GPU_ACTIVITY_KINDS))
    group = (ev.device[rows] if by == "device" else ev.device[rows] * 1_000_003 + ev.stream[rows]).astype(np.int64)
    order = np.lexsort((ev.ts_ns[rows], group))
    rows, group = rows[order], group[order]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    prev_end = _previous_running_max(group, end)
    has_prev = prev_end > np.iinfo(np.int64).min // 2
    gap_start = np.where(has_prev, prev_end, start)
    busy = np.maximum(0, end - np.maximum(start, gap_start))
    launch = links.launch[rows]
    safe = np.maximum(launch, 0)
    launch_ts = ev.ts_ns[safe]
    return Gaps(
        group=group,
        row=rows,
        step=links.step[rows],
        gap_start_ns=gap_start,
        gap_end_ns=start,
        launch_ts_ns=np.where(launch >= 0, launch_ts, -1),
        launch_end_ns=np.where(launch >= 0, launch_ts + ev.dur_ns[safe], -1),
        busy_ns=busy,
    )


def gap_table(trace: Trace, by: str = "device") -> pd.DataFrame:
    """`gap_arrays(trace, by)` as a DataFrame (for reports and tests; analyses use the arrays)."""
    return gap_arrays(trace, by).frame()


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


def classify_gaps(trace: Trace, gaps: Gaps | pd.DataFrame) -> np.ndarray:
    """Nanoseconds of each gap charged to each cause, shape (len(gaps), len(CAUSES)); see `launch_wait_spans`.

    The part of a gap until the last overlapping sync returns is `sync`; the rest is `launch` when the activity
    ending the gap was launched by a call that returned after that point and it started within
    `LAUNCH_SLACK_NS` of the call returning, else `other`. `gaps`: `gap_arrays` or `gap_table` entries.
    """
    gaps = Gaps.of(gaps)
    return _cause_amounts(gaps, *launch_wait_spans(trace, gaps))


def _cause_amounts(gaps: Gaps, boundary: np.ndarray, waited: np.ndarray) -> np.ndarray:
    start, end = gaps.gap_start_ns, gaps.gap_end_ns
    length = np.maximum(end - start, 0)
    rest_start = np.maximum(start, boundary)
    amounts = np.zeros((start.size, len(CAUSES)), dtype=np.float64)
    amounts[:, CAUSES.index("sync")] = boundary - start
    rest = np.maximum(end - rest_start, 0) * (length > 0)
    amounts[:, CAUSES.index("launch")] = np.where(waited, rest, 0)
    amounts[:, CAUSES.index("other")] = np.where(waited, 0, rest)
    return amounts


def launch_wait_spans(trace: Trace, gaps: Gaps | pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(when each gap's sync part ends, whether the rest of the gap waited for a launch)."""
    gaps = Gaps.of(gaps)
    start, end = gaps.gap_start_ns, gaps.gap_end_ns
    boundary = np.clip(_sync_release(trace, start, end), start, np.maximum(end, start))
    rest_start = np.maximum(start, boundary)
    launch_end = gaps.launch_end_ns
    waited = (gaps.launch_ts_ns >= 0) & (launch_end > rest_start) & (end <= launch_end + LAUNCH_SLACK_NS)
    return boundary, waited


def _dispatch_timeline(trace: Trace, window: Window) -> np.ndarray:
    """Merged (k, 2) ns intervals when some thread ran dispatch work (ops, launches, queries, compile wrappers)."""
    ev = trace.events
    layer = classify_layers(trace)
    dispatch = (layer >= 0) & (layer != LAYERS.index("python")) & (layer != LAYERS.index("sync"))
    rows = np.flatnonzero(window.in_window & dispatch)
    return merge_intervals(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])


def _sync_release(trace: Trace, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each gap: when the CPU left the last sync overlapping it (gap end if a sync outlasts the gap,
    gap start if none overlaps)."""
    ev = trace.events
    layer = classify_layers(trace)
    sync = np.flatnonzero(kind_mask(ev.kind, API_KINDS) & (layer == LAYERS.index("sync")))
    release = start.copy()
    if sync.size == 0 or start.size == 0:
        return release
    sync_start = ev.ts_ns[sync]
    sync_end = sync_start + ev.dur_ns[sync]
    order = np.argsort(sync_end, kind="stable")
    sync_end, sync_start = sync_end[order], sync_start[order]
    suffix_min_start = np.minimum.accumulate(sync_start[::-1])[::-1]
    last = np.searchsorted(sync_end, end, side="right") - 1  # last sync ending at or before the gap end
    has_last = last >= 0
    ends_inside = np.zeros(start.size, dtype=bool)
    ends_inside[has_last] = sync_end[last[has_last]] > start[has_last]
    release[ends_inside] = sync_end[last[ends_inside]]
    later = last + 1
    has_later = later < sync_end.size
    outlasts = np.zeros(start.size, dtype=bool)
    outlasts[has_later] = suffix_min_start[later[has_later]] < end[has_later]
    release[outlasts] = end[outlasts]
    return release


def analyze_bound(ctx: AnalysisContext) -> Bound:
    """With the dispatch analysis' CPU dispatch time; compilation time is taken out of the gaps when compiling
    events (not whole steps) were left out of the window."""
    from tracelens.analyses.compiled import Compiled
    from tracelens.analyses.dispatch import Dispatch

    excluded = ctx.compile_intervals if ctx.result(Compiled).excluded_events else None
    return bound_of(ctx.trace, ctx.steady, ctx.result(Dispatch).dispatch_us_per_step, excluded)


def bound_of(trace: Trace, window: Window, dispatch_us_per_step: float, excluded: np.ndarray | None = None) -> Bound:
    """`excluded`: merged (k, 2) ns intervals (e.g. compilation) whose time is taken out of every gap."""
    gaps = gap_arrays(trace, by="device")
    gaps = gaps.take(window.in_window[gaps.row])
    n = max(window.n_steps, 1)
    if len(gaps) == 0:
        return Bound("unknown", 0.0, 0.0, 0.0, 0.0, _r(dispatch_us_per_step), 0.0, None, None, 0.0, [])
    boundary, waited = launch_wait_spans(trace, gaps)
    amounts_us = _cause_amounts(gaps, boundary, waited) / NS_PER_US
    if excluded is not None and excluded.shape[0]:
        start, end = gaps.gap_start_ns, gaps.gap_end_ns
        length = np.maximum(end - start, 0).astype(np.float64)
        kept = length - _covered(excluded, start, end)
        amounts_us *= np.divide(kept, length, out=np.zeros_like(length), where=length > 0)[:, None]
    length_us = amounts_us.sum(axis=1)
    busy_us = gaps.busy_ns / NS_PER_US
    lookup = np.full(len(trace.steps), -1, dtype=np.int64)
    lookup[window.step_indices] = np.arange(window.n_steps)
    slot = lookup[gaps.step]  # activity in the window belongs to an analyzed step
    grid = np.zeros((window.n_steps, len(CAUSES) + 1))
    for cause in range(len(CAUSES)):
        grid[:, cause] = np.bincount(slot, weights=amounts_us[:, cause], minlength=window.n_steps)
    grid[:, len(CAUSES)] = np.bincount(slot, weights=busy_us, minlength=window.n_steps)
    steps = [
        StepBound(int(num), _r(g[3]), _r(g[0]), _r(g[1]), _r(g[2]), verdict(g[3], g[0], g[1] + g[2]))
        for num, g in zip(window.step_numbers, grid, strict=True)
    ]
    total = grid.sum(axis=0) / n
    exposed_us = _exposed_dispatch_us(trace, window, gaps, boundary, waited)
    exposed = min(exposed_us / n, dispatch_us_per_step, float(total[0]))
    return Bound(
        bound=verdict(total[3], total[0], total[1] + total[2]),
        gpu_busy_us_per_step=_r(total[3]),
        launch_wait_us_per_step=_r(total[0]),
        sync_wait_us_per_step=_r(total[1]),
        other_idle_us_per_step=_r(total[2]),
        dispatch_us_per_step=_r(dispatch_us_per_step),
        exposed_dispatch_us_per_step=_r(exposed),
        exposed_dispatch_pct=_r(100 * exposed / dispatch_us_per_step) if dispatch_us_per_step > 0 else None,
        exposed_dispatch_pct_of_gpu=_r(100 * exposed / total.sum()) if total.sum() > 0 else None,
        gaps_per_step=_r(np.count_nonzero(length_us > 0) / n),
        steps=steps,
    )


def _exposed_dispatch_us(trace: Trace, window: Window, gaps: Gaps, boundary: np.ndarray, waited: np.ndarray) -> float:
    """Dispatch time (union over threads) that fell inside the launch-wait part of a gap: the GPU sat idle
    while the CPU was issuing its next work. `boundary`, `waited`: `launch_wait_spans` of `gaps`."""
    if not waited.any():
        return 0.0
    timeline = _dispatch_timeline(trace, window)
    if timeline.shape[0] == 0:
        return 0.0
    start = np.maximum(gaps.gap_start_ns, boundary)[waited]
    end = gaps.gap_end_ns[waited]
    return float(_covered(timeline, start, np.maximum(end, start)).sum()) / NS_PER_US


def _covered(intervals: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Length of [start, end) covered by sorted, disjoint `intervals` (k, 2), for each row."""
    lengths = intervals[:, 1] - intervals[:, 0]
    cumulative = np.concatenate(([0], np.cumsum(lengths)))

    def covered_before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(intervals[:, 0], t, side="right")  # intervals starting at or before t
        inside = np.clip(t - intervals[np.maximum(i - 1, 0), 0], 0, lengths[np.maximum(i - 1, 0)])
        return cumulative[np.maximum(i - 1, 0)] + np.where(i > 0, inside, 0)

    return np.maximum(covered_before(end) - covered_before(start), 0).astype(np.float64)


def verdict(busy_us: float, launch_wait_us: float, other_idle_us: float) -> str:
    span = busy_us + launch_wait_us + other_idle_us
    if span <= 0:
        return "unknown"
    if launch_wait_us > busy_us:
        return "cpu"
    if busy_us >= GPU_BOUND_MIN_BUSY * span:
        return "gpu"
    return "mixed"


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)

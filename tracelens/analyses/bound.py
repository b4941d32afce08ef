"""Exposed vs hidden: why the GPU idles inside each step, and whether the window is CPU- or GPU-bound.

Contract: `analyze_bound(ctx) -> Bound` (`bound_of(trace, window, dispatch_us_per_step)` for any window); pure.
Definitions: docs/definitions.md.

Each step has a GPU window (`activity.StepWindows`: from its CPU start, or the end of the previous step's GPU
work if later, to the end of its own GPU work or its CPU end if later). Per device, the window is split exactly
into busy time (the union of ALL GPU activity inside it, whoever launched it) and idle buckets, so
busy + launch + sync + queued + other (+ compile) = the window, always. Each idle gap between busy intervals
is classified by the activity that ends it:
- `queued`: that activity's launch call had returned before the gap began: the work was already queued and
  the GPU still did not run it (cross-stream waits, events, device-side scheduling) — even when a sync overlaps;
- `sync`: otherwise, until the CPU returned from a synchronisation or blocking host copy overlapping the gap;
- `launch`: the rest, when the activity's launch call returned after that point and the activity started within
  `LAUNCH_SLACK_NS` of the call returning: the GPU waited for the CPU to dispatch it;
- `other`: the rest otherwise (no launch recorded, or no later activity on the device); the time after a
  device's last activity is `sync` until the CPU left a sync overlapping it, the rest `other`;
- `compile`: idle time inside compilation spans, when the caller passes them as `excluded`.
Verdict: the critical path's what-ifs over the same steps decide it where they can (`agreed_with`: "cpu" when
all CPU work 2× faster saves at least twice what all GPU work 2× faster saves, "gpu" the other way round, else
"mixed"); the idle thresholds' verdict is kept as `idle_verdict` and decides alone where the steps do not replay.
Idle thresholds, per step and for the window: "cpu" when launch waits are at least the busy time; "gpu" when busy is at
least `GPU_BOUND_MIN_BUSY` of the window and launch waits at most `GPU_BOUND_MAX_LAUNCH_WAIT` of it; else
"mixed" (neither side dominates); "unknown" without GPU activity.
Exposed dispatch: the CPU dispatch SELF time (the same events and self time as `dispatch_us`: op, launch,
query, compile-wrapper and other API layers, minus their children such as Python frames) that ran while the
GPU was in a launch wait, per step; never capped: it cannot exceed either by construction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.activity import device_busy_intervals, step_windows
from tracelens.analyses.compiled import Compiled
from tracelens.analyses.critical_path import CriticalPath
from tracelens.analyses.dispatch import LAYERS, Dispatch, classify_layers
from tracelens.analyses.intervals import previous_running_max
from tracelens.analyses.profiler_overhead import verdict_without_profiler
from tracelens.analyses.summary import Summary
from tracelens.analyses.window import Window, covered_ns, merge_intervals
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, I64, kind_mask
from tracelens.model.steps import is_whole_trace
from tracelens.model.trace import Trace
from tracelens.records import field_names
from tracelens.units import NS_PER_US, count_text

if TYPE_CHECKING:
    import pandas as pd

    from tracelens.analyses.context import AnalysisContext

LAUNCH_SLACK_NS = 10_000
GPU_BOUND_MIN_BUSY = 0.85  # of the GPU window
GPU_BOUND_MAX_LAUNCH_WAIT = 0.10  # of the GPU window
CAUSES = ("launch", "sync", "queued", "other")
BUCKETS = (*CAUSES, "compile", "busy")  # the window's parts, in `_step_grid` columns


class StepBound(msgspec.Struct, frozen=True):
    """One step's GPU window split into busy and idle buckets (µs, summed over devices):
    busy + launch + sync + queued + other + compile = window."""

    number: int
    gpu_busy_us: float
    launch_wait_us: float
    sync_wait_us: float
    other_idle_us: float
    bound: str
    queued_idle_us: float = 0.0
    compile_idle_us: float = 0.0
    gpu_window_us: float = 0.0
    exposed_dispatch_us: float = 0.0

    @property
    def idle_us(self) -> float:
        return self.launch_wait_us + self.sync_wait_us + self.queued_idle_us + self.other_idle_us + self.compile_idle_us


class Bound(msgspec.Struct, frozen=True):
    """Per-step means over the analyzed window (busy and idle summed over devices). Figures that cannot be
    computed (no GPU activity, no analyzed step) are None."""

    bound: str  # "cpu" | "gpu" | "mixed" | "unknown" (no GPU activity)
    gpu_busy_us_per_step: float | None
    launch_wait_us_per_step: float | None
    sync_wait_us_per_step: float | None
    other_idle_us_per_step: float | None
    dispatch_us_per_step: float | None
    exposed_dispatch_us_per_step: float | None  # dispatch self time while the GPU waited for a launch
    exposed_dispatch_pct: float | None  # of the dispatch time
    exposed_dispatch_pct_of_gpu: float | None  # of the GPU window
    gaps_per_step: float | None
    steps: list[StepBound]
    queued_idle_us_per_step: float | None = None
    compile_idle_us_per_step: float | None = None
    gpu_window_us_per_step: float | None = None
    thresholds: str = ""  # the verdict's thresholds, as stated in the output
    reason: str | None = None  # why the figures are None ("unknown" verdict), else None
    idle_verdict: str | None = None  # the verdict of the idle thresholds alone (`thresholds`)
    verdict_basis: str = "idle"  # "what-if": the critical path's what-ifs over the same steps decided `bound`
    verdict_note: str | None = None  # why the verdict is what it is when the bases differ
    # "gpu" where `bound` (cpu or mixed) would likely read gpu without the profiler: the GPU busy at least 85 % of
    # the profiler-free step (`profiler_overhead.verdict_without_profiler`); None otherwise or where not known
    verdict_without_profiler: str | None = None
    busy_pct_without_profiler: float | None = None  # the GPU's busy share of that step, % (with the verdict)


class Gaps(msgspec.Struct, frozen=True):
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
        return Gaps(*(getattr(self, name)[index] for name in field_names(self)))

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: getattr(self, name) for name in field_names(self)})

    @classmethod
    def of(cls, gaps: Gaps | pd.DataFrame) -> Gaps:
        """`gaps` itself, or the arrays of a `gap_table` frame (possibly filtered)."""
        if isinstance(gaps, Gaps):
            return gaps
        return cls(*(gaps[name].to_numpy() for name in field_names(cls)))


def gap_arrays(trace: Trace, by: str = "device") -> Gaps:
    """Every idle gap between busy intervals of GPU activity, grouped by "device" or "stream".

    Columns: group, row (activity ending the gap), step, gap_start_ns, gap_end_ns, launch_ts_ns, launch_end_ns,
    busy_ns (that activity's contribution to the busy union, for every activity, gap or not).
    """
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(kind_mask(ev.kind, GPU_ACTIVITY_KINDS))
    group = (ev.device[rows] if by == "device" else ev.device[rows] * 1_000_003 + ev.stream[rows]).astype(np.int64)
    if rows.size < 2 or bool(np.all(ev.ts_ns[rows[1:]] >= ev.ts_ns[rows[:-1]])):
        order = np.argsort(group, kind="stable")  # rows in time order: the same as the lexsort
    else:
        order = np.lexsort((ev.ts_ns[rows], group))
    rows, group = rows[order], group[order]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    prev_end = previous_running_max(group, end)
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
    queued = _already_queued(gaps)
    amounts[queued] = 0
    amounts[queued, CAUSES.index("queued")] = length[queued]
    return amounts


def _already_queued(gaps: Gaps) -> np.ndarray:
    """Gaps whose ending activity's launch call had returned by the time the gap began."""
    return (gaps.launch_end_ns >= 0) & (gaps.launch_end_ns <= gaps.gap_start_ns) & (gaps.gap_end_ns > gaps.gap_start_ns)


def launch_wait_spans(trace: Trace, gaps: Gaps | pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(when each gap's sync part ends, whether the rest of the gap waited for a launch)."""
    gaps = Gaps.of(gaps)
    start, end = gaps.gap_start_ns, gaps.gap_end_ns
    boundary = np.clip(_sync_release(trace, start, end), start, np.maximum(end, start))
    queued = _already_queued(gaps)
    boundary = np.where(queued, start, boundary)
    rest_start = np.maximum(start, boundary)
    launch_end = gaps.launch_end_ns
    waited = (gaps.launch_ts_ns >= 0) & (launch_end > rest_start) & (end <= launch_end + LAUNCH_SLACK_NS) & ~queued
    return boundary, waited


def _dispatch_timeline(trace: Trace, window: Window, within: np.ndarray) -> np.ndarray:
    """Merged (k, 2) ns intervals of dispatch SELF time (union over threads): the parts of dispatch-layer
    events (all layers but python and sync, as in `dispatch_us`) not covered by one of their children; exact
    inside `within` (sorted, disjoint (k, 2) intervals), the only place it is used: events that do not overlap
    `within` are left out (their pieces lie outside it)."""
    layer = classify_layers(trace)
    dispatch = (layer >= 0) & (layer != LAYERS.index("python")) & (layer != LAYERS.index("sync"))
    rows = np.flatnonzero(window.in_window & dispatch)
    return merge_intervals(*self_time_pieces(trace, rows[_overlaps(trace, rows, within)]))


def _overlaps(trace: Trace, rows: np.ndarray, within: np.ndarray) -> np.ndarray:
    """Whether each event at `rows` overlaps one of the sorted, disjoint intervals `within` (k, 2)."""
    if within.shape[0] == 0:
        return np.zeros(rows.size, dtype=bool)
    start = trace.events.ts_ns[rows]
    end = start + trace.events.dur_ns[rows]
    first = np.minimum(ends_at_or_before(within[:, 1], start), within.shape[0] - 1)  # ends after start
    return (within[first, 1] > start) & (within[first, 0] < end)


def ends_at_or_before(ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """`np.searchsorted(ends, times, side="right")` for sorted `ends`: how many of `ends` are at or before each
    time. Many sorted `times` (events in row order) are answered by placing the fewer `ends` among them."""
    if times.size <= 4 * ends.size or not bool(np.all(times[1:] >= times[:-1])):
        return np.searchsorted(ends, times, side="right")
    first_after = np.searchsorted(times, ends, side="left")  # each end counts for the times from here on
    return np.cumsum(np.bincount(first_after, minlength=times.size + 1)[: times.size])


def self_time_pieces(trace: Trace, rows: np.ndarray, within: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(start_ns, end_ns) of the pieces of each event at `rows` that none of its direct children covers. With
    `within` (sorted, disjoint (k, 2) intervals) only the children that overlap it are taken: the pieces are
    exact inside `within` (a child outside it covers nothing there)."""
    ev, parent = trace.events, trace.links.parent
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    chosen = np.zeros(len(ev) + 1, dtype=bool)  # the extra slot answers parent -1 (no parent): False
    chosen[rows] = True
    child = np.flatnonzero(np.take(chosen, parent))
    if child.size < 2 or bool(np.all(ev.ts_ns[child[1:]] >= ev.ts_ns[child[:-1]])):
        child = child[np.argsort(parent[child], kind="stable")]  # rows in time order: the same as the lexsort
    else:
        child = child[np.lexsort((ev.ts_ns[child], parent[child]))]
    owner = parent[child].astype(np.int64)
    child_start = ev.ts_ns[child]
    child_end = child_start + ev.dur_ns[child]
    first = np.ones(child.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    last = np.ones(child.size, dtype=bool)
    last[:-1] = first[1:]
    span = int(child_end.max(initial=0)) - int(min(0, int(child_end.min(initial=0)))) + 1
    offset = np.cumsum(first) * (2 * span)  # later owners exceed earlier ones: one running max serves them all
    running_end = np.maximum.accumulate(child_end + offset)
    running_end -= offset
    before_end = np.empty(child.size, dtype=np.int64)  # where the piece before each child starts
    before_end[1:] = running_end[:-1]
    before_end[first] = ev.ts_ns[owner[first]]
    owner_end = ev.ts_ns[owner] + ev.dur_ns[owner]
    gap_end = np.minimum(child_start, owner_end)
    before = gap_end > before_end
    tail_start, tail_end = running_end[last], owner_end[last]
    after = tail_end > tail_start
    has_child = np.zeros(len(ev), dtype=bool)
    has_child[owner] = True
    alone = rows[~has_child[rows]]
    alone = alone[ev.dur_ns[alone] > 0]
    starts = np.concatenate((before_end[before], tail_start[after], ev.ts_ns[alone]))
    ends = np.concatenate((gap_end[before], tail_end[after], ev.ts_ns[alone] + ev.dur_ns[alone]))
    return starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)


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
    excluded = ctx.compile_intervals if ctx.result(Compiled).excluded_events else None
    idle = bound_of(ctx.trace, ctx.steady, ctx.result(Dispatch).dispatch_us_per_step, excluded)
    return without_profiler(agreed_with(idle, ctx.result(CriticalPath)), ctx.result(Summary))


def without_profiler(bound: Bound, summary: Summary) -> Bound:
    """`bound` with the verdict it would likely have without the profiler where that differs
    (`profiler_overhead.verdict_without_profiler` of the summary's GPU busy time and profiler-free step)."""
    free, busy = summary.profiler_free, summary.per_step.gpu_busy_us
    free_us = free.step_us if free is not None else None
    flip = verdict_without_profiler(bound.bound, busy, free_us)
    if flip is None or busy is None or not free_us:
        return bound
    share = round(min(100.0 * busy / free_us, 100.0), 1)
    return msgspec.structs.replace(bound, verdict_without_profiler=flip, busy_pct_without_profiler=share)


def agreed_with(idle: Bound, path: CriticalPath) -> Bound:
    """`idle` with its verdicts (window and steps) taken from the critical path's what-ifs over the same steps
    (`CriticalPath.limit`, `StepPath.limit`) wherever those decide (not "unknown"), so that no verdict
    contradicts the path and what-ifs printed beside it; `idle_verdict` keeps the thresholds' verdict and
    `verdict_note` says why they differ."""
    if idle.bound == "unknown" or path.limit == "unknown" or not path.steps:
        return msgspec.structs.replace(idle, idle_verdict=idle.bound)
    by_step = {s.number: s.limit for s in path.steps if s.limit != "unknown"}
    steps = [msgspec.structs.replace(s, bound=by_step.get(s.number, s.bound)) for s in idle.steps]
    note = None
    whole = is_whole_trace([s.number for s in path.steps])  # the whole-trace window: no steps
    over = "window (the whole trace)" if whole else count_text(path.steps_analyzed, "step")
    if path.limit != idle.bound:
        note = (
            f"the idle thresholds alone say {idle.bound}; the what-ifs over the same {over} decide: {path.limit_note}"
        )
    return msgspec.structs.replace(
        idle, bound=path.limit, steps=steps, idle_verdict=idle.bound, verdict_basis="what-if", verdict_note=note
    )


def bound_of(
    trace: Trace, window: Window, dispatch_us_per_step: float | None, excluded: np.ndarray | None = None
) -> Bound:
    """`excluded`: merged (k, 2) ns intervals (compilation) whose idle time is booked as `compile`."""
    windows = step_windows(trace)
    chosen = window.step_indices
    n = window.n_steps
    dispatch = _r(dispatch_us_per_step) if dispatch_us_per_step is not None and n else None
    if windows.devices.size == 0 or n == 0:
        reason = "no GPU activity in the trace" if windows.devices.size == 0 else "no analyzed step"
        none = None
        return Bound(
            "unknown",
            none,
            none,
            none,
            none,
            dispatch,
            none,
            none,
            none,
            none,
            [],
            thresholds=THRESHOLDS,
            reason=reason,
        )
    start, end = windows.start_ns[chosen], windows.end_ns[chosen]
    grid, launch_pieces, gaps_count = _step_grid(trace, start, end, excluded)
    exposed = _exposed_per_step(trace, window, launch_pieces, start, end) / NS_PER_US
    grid_us = grid / NS_PER_US
    col = {name: i for i, name in enumerate(BUCKETS)}
    steps = [
        StepBound(
            number=int(number),
            gpu_busy_us=_r(g[col["busy"]]),
            launch_wait_us=_r(g[col["launch"]]),
            sync_wait_us=_r(g[col["sync"]]),
            other_idle_us=_r(g[col["other"]]),
            bound=verdict(g[col["busy"]], g[col["launch"]], g.sum() - g[col["busy"]] - g[col["launch"]]),
            queued_idle_us=_r(g[col["queued"]]),
            compile_idle_us=_r(g[col["compile"]]),
            gpu_window_us=_r(g.sum()),
            exposed_dispatch_us=_r(x),
        )
        for number, g, x in zip(window.step_numbers, grid_us, exposed, strict=True)
    ]
    total = grid_us.sum(axis=0) / n
    window_us = float(total.sum())
    exposed_us = float(exposed.sum()) / n
    busy, launch = float(total[col["busy"]]), float(total[col["launch"]])
    return Bound(
        bound=verdict(busy, launch, window_us - busy - launch),
        gpu_busy_us_per_step=_r(busy),
        launch_wait_us_per_step=_r(launch),
        sync_wait_us_per_step=_r(total[col["sync"]]),
        other_idle_us_per_step=_r(total[col["other"]]),
        dispatch_us_per_step=dispatch,
        exposed_dispatch_us_per_step=_r(exposed_us),
        # exposed ≤ dispatch by construction; `dispatch` is rounded to 3 decimals, so cap the unrounded share
        exposed_dispatch_pct=_r(100 * min(exposed_us, dispatch) / dispatch) if dispatch else None,
        exposed_dispatch_pct_of_gpu=_r(100 * exposed_us / window_us) if window_us > 0 else None,
        gaps_per_step=_r(gaps_count / n),
        steps=steps,
        queued_idle_us_per_step=_r(total[col["queued"]]),
        compile_idle_us_per_step=_r(total[col["compile"]]),
        gpu_window_us_per_step=_r(window_us),
        thresholds=THRESHOLDS,
    )


THRESHOLDS = (
    f"cpu: launch waits >= GPU busy; gpu: busy >= {GPU_BOUND_MIN_BUSY:.0%} of the GPU window and launch waits "
    f"<= {GPU_BOUND_MAX_LAUNCH_WAIT:.0%}; mixed: otherwise"
)


def _with_tails(
    rows: np.ndarray, device: np.ndarray, gap: tuple[np.ndarray, np.ndarray], tail: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, device) segments: the gaps' at `rows` (on `device`, sorted by device) and each device's tail
    (indexed by device) after that device's gaps, so that the segments stay sorted by (device, start)."""
    index = np.concatenate((rows, np.full(tail[0].size, -1)))
    on = np.concatenate((device, np.arange(tail[0].size)))
    order = np.argsort(on, kind="stable")
    index, on = index[order], on[order]
    is_tail = index < 0
    safe = np.maximum(index, 0)
    start = np.where(is_tail, tail[0][on], gap[0][safe])
    end = np.where(is_tail, tail[1][on], gap[1][safe])
    return start, end, on


def _step_grid(
    trace: Trace, start: np.ndarray, end: np.ndarray, excluded: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """ns per (step window, bucket of `BUCKETS`) summed over devices; the launch-wait pieces (k, 2), merged over
    devices (only their parts inside the windows count); the number of idle gaps with time inside the windows.

    Every device's timeline from the first window start to the last window end is cut into busy intervals
    and classified idle segments (sorted and disjoint per device); each bucket is the length of its segments
    inside each window. Devices are laid end to end on one axis so that one pass serves them all."""
    low, high = int(start.min()), int(end.max())
    gaps = gap_arrays(trace, by="device")
    first = np.ones(len(gaps), dtype=bool)
    first[1:] = gaps.group[1:] != gaps.group[:-1]
    gaps = Gaps(**{name: np.array(getattr(gaps, name)) for name in field_names(gaps)})
    gaps.gap_start_ns[first] = np.minimum(gaps.gap_start_ns[first], low)  # the idle time before the first activity
    boundary, waited = launch_wait_spans(trace, gaps)
    queued = _already_queued(gaps)
    rest_cause = np.where(
        queued, CAUSES.index("queued"), np.where(waited, CAUSES.index("launch"), CAUSES.index("other"))
    )
    busy_by_device = device_busy_intervals(trace)
    devices = np.asarray(sorted(busy_by_device), dtype=np.int64)
    g_start, g_end = gaps.gap_start_ns, gaps.gap_end_ns
    g_device = np.searchsorted(devices, gaps.group)
    busy = np.concatenate([busy_by_device[int(d)] for d in devices.tolist()])
    busy_device = np.repeat(np.arange(devices.size), [busy_by_device[int(d)].shape[0] for d in devices.tolist()])
    last_busy_end = np.array([int(busy_by_device[int(d)][-1, 1]) for d in devices.tolist()], dtype=np.int64)
    # segments per kind, each sorted by (device, start) and disjoint within a device
    seg: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    sync_end = np.minimum(boundary, g_end)
    rest_start = np.maximum(g_start, boundary)
    for cause in ("launch", "queued"):
        on = rest_cause == CAUSES.index(cause)
        seg[CAUSES.index(cause)] = (rest_start[on], g_end[on], g_device[on])
    # each device's trailing idle time, after its last busy interval (no later activity ends it): its sync part
    # (until the CPU left the last sync overlapping it) is sync, the rest other; after the device's gaps
    trail_end = np.maximum(high, last_busy_end)
    trail_sync_end = np.clip(_sync_release(trace, last_busy_end, trail_end), last_busy_end, trail_end)
    seg[CAUSES.index("sync")] = _with_tails(
        np.arange(g_start.size), g_device, (g_start, sync_end), (last_busy_end, trail_sync_end)
    )
    on = np.flatnonzero(rest_cause == CAUSES.index("other"))
    seg[CAUSES.index("other")] = _with_tails(on, g_device[on], (rest_start, g_end), (trail_sync_end, trail_end))
    busy_bucket, compile_bucket = BUCKETS.index("busy"), BUCKETS.index("compile")
    has_excluded = excluded is not None and excluded.shape[0] > 0
    ex = excluded if excluded is not None and has_excluded else np.zeros((0, 2), dtype=np.int64)
    base = min(low, int(g_start.min()), int(busy[:, 0].min()), int(ex[:, 0].min(initial=low)))
    top = max(high, int(trail_end.max()), int(ex[:, 1].max(initial=high)))
    span = top - base + 1
    shift = np.arange(devices.size, dtype=np.int64) * span - base  # device d's times go to t + shift[d]
    w_start = (start[None, :] + shift[:, None]).ravel()
    w_end = (end[None, :] + shift[:, None]).ravel()
    ex_on_axis = np.stack(
        ((ex[None, :, 0] + shift[:, None]).ravel(), (ex[None, :, 1] + shift[:, None]).ravel()), axis=1
    )
    not_ex = _complement(ex_on_axis)

    def on_axis(s: np.ndarray, e: np.ndarray, d: np.ndarray) -> np.ndarray:
        keep = e > s
        return np.stack((s[keep] + shift[d[keep]], e[keep] + shift[d[keep]]), axis=1)

    def per_window(intervals: np.ndarray) -> np.ndarray:
        return covered_ns(intervals, w_start, w_end).reshape(devices.size, start.size).sum(axis=0)

    grid = np.zeros((start.size, len(BUCKETS)), dtype=np.float64)
    grid[:, busy_bucket] = per_window(on_axis(busy[:, 0], busy[:, 1], busy_device))
    launch_on_axis = np.zeros((0, 2), dtype=np.int64)
    for kind, (s, e, d) in seg.items():
        intervals = on_axis(s, e, d)
        if has_excluded:
            grid[:, compile_bucket] += per_window(_intersect(intervals, ex_on_axis))
            intervals = _intersect(intervals, not_ex)
        grid[:, kind] = per_window(intervals)
        if kind == CAUSES.index("launch"):
            launch_on_axis = intervals
    device_of = np.searchsorted(shift + base, launch_on_axis[:, 0], side="right") - 1
    off = (shift[device_of] if device_of.size else np.zeros(0, dtype=np.int64))[:, None]
    launch_pieces = launch_on_axis - off
    idle_gap = (g_end > g_start) & (g_end > low) & (g_start < high)
    gap_slot = _lookup(start, end, np.maximum(g_start, low), np.arange(start.size))
    gap_total = int(np.count_nonzero(idle_gap & (gap_slot >= 0)))
    return grid, merge_intervals(launch_pieces[:, 0], launch_pieces[:, 1]), gap_total


def _complement(intervals: np.ndarray) -> np.ndarray:
    """The gaps around sorted, disjoint `intervals` (k, 2), out to the int64 range's quarter-points."""
    far = np.iinfo(np.int64).max // 4
    return np.stack((np.concatenate(([-far], intervals[:, 1])), np.concatenate((intervals[:, 0], [far]))), axis=1)


def _lookup(starts: np.ndarray, ends: np.ndarray, points: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For sorted, disjoint [starts, ends): `values` of the interval holding each point, -1 where none."""
    if starts.size == 0:
        return np.full(points.size, -1, dtype=np.int64)
    i = np.searchsorted(starts, points, side="right") - 1
    safe = np.maximum(i, 0)
    hit = (i >= 0) & (points < ends[safe])
    return np.where(hit, np.asarray(values)[safe], -1).astype(np.int64)


def _exposed_per_step(
    trace: Trace, window: Window, launch_pieces: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """ns per step window of dispatch self time that ran while the GPU was in a launch wait."""
    if launch_pieces.shape[0] == 0:
        return np.zeros(start.size)
    timeline = _dispatch_timeline(trace, window, launch_pieces)
    if timeline.shape[0] == 0:
        return np.zeros(start.size)
    both = _intersect(timeline, launch_pieces)
    return covered_ns(both, start, end)


def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection of two sorted, disjoint interval sets (k, 2): sorted, disjoint rows (touching ones may stay
    apart)."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int64)
    first = np.searchsorted(b[:, 1], a[:, 0], side="right")  # first b ending after each a starts
    stop = np.searchsorted(b[:, 0], a[:, 1], side="left")  # first b starting at or after each a ends
    count = np.maximum(stop - first, 0)
    ai = np.repeat(np.arange(a.shape[0]), count)
    bj = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + np.repeat(first, count)
    lo = np.maximum(a[ai, 0], b[bj, 0])
    hi = np.minimum(a[ai, 1], b[bj, 1])
    keep = hi > lo
    return np.stack((lo[keep], hi[keep]), axis=1).astype(np.int64)


def _covered(intervals: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Length of [start, end) covered by sorted, disjoint `intervals` (k, 2), for each row."""
    return covered_ns(intervals, start, end)


def verdict(busy_us: float, launch_wait_us: float, other_idle_us: float) -> str:
    """The verdict: "cpu" when launch waits >= busy; "gpu" when busy >= GPU_BOUND_MIN_BUSY of the window
    (busy + all idle) and launch waits <= GPU_BOUND_MAX_LAUNCH_WAIT of it; "mixed" otherwise; "unknown" for an
    empty window."""
    span = busy_us + launch_wait_us + other_idle_us
    if span <= 0:
        return "unknown"
    if launch_wait_us >= busy_us:
        return "cpu"
    if busy_us >= GPU_BOUND_MIN_BUSY * span and launch_wait_us <= GPU_BOUND_MAX_LAUNCH_WAIT * span:
        return "gpu"
    return "mixed"


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)

"""Nesting of CPU-side events per thread, vectorised (pointer jumping, no per-event Python loop).

Contract: `parent[i]` is the innermost CPU-side event on the same track that starts at or before event i, is
still running at its start (or ends with it), and ends at or after its end less `OVERHANG_TOLERANCE_NS` (a
child overhanging its parent by a few ns, common after µs rounding, still gets that parent). An event that
outlives the event it started in by more (a `record_function` annotation entered in one Python frame and
exited after it returned, such as `ProfilerStep#N` started by `profiler.step()`) nests in the innermost event
that contains all of it, so that the events after the shorter one ended are never taken for its descendants.
Python frames that outlive their Python caller are clipped first (`clip_unreturned_frames`).
"""

from __future__ import annotations

import numpy as np

from tracelens import native
from tracelens.model.events import CPU_KINDS, I32, I64, EventTable, Kind, kind_mask, kind_table
from tracelens.native import extension as _native

OVERHANG_TOLERANCE_NS = 1_000  # µs-rounded timestamps: a child may overhang its parent's end by up to 1 µs

# Ties in (start, end): the outer one sorts first.
_TIE_PRIORITY = np.zeros(max(Kind) + 1, dtype=np.int8)
_TIE_PRIORITY[Kind.USER_ANNOTATION] = 0
_TIE_PRIORITY[Kind.PYTHON] = 1
_TIE_PRIORITY[Kind.CPU_OP] = 2
_TIE_PRIORITY[Kind.RUNTIME] = 3
_TIE_PRIORITY[Kind.DRIVER] = 3


def clip_unreturned_frames(events: EventTable) -> tuple[I64, int]:
    """(durations, how many were clipped). The profiler closes the Python frames that had not returned when it
    stopped at the end of the recording (C methods such as `<built-in method apply of FunctionMeta>` of a compiled
    autograd function, every step), but a frame cannot outlive the Python frame that called it: each such
    unfinished frame (ending with the recording, within `OVERHANG_TOLERANCE_NS`) that outlives the Python frame
    it started in ends with that frame instead (callers first; a caller that ends before a frame starts is not
    its caller). The loop runs over the unfinished frames only."""
    python_rows = np.flatnonzero(events.kind == Kind.PYTHON)
    if python_rows.size == 0:
        return events.dur_ns, 0
    cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
    start = events.ts_ns[cpu]
    end = start + events.dur_ns[cpu]
    recording_end = int(end.max())
    python_end = events.ts_ns[python_rows] + events.dur_ns[python_rows]
    if not np.any(python_end >= recording_end - OVERHANG_TOLERANCE_NS):  # no frame was open at the end: no sort
        return events.dur_ns, 0
    track = events.track[cpu]
    order = _nesting_order(cpu, start, end, track, _TIE_PRIORITY[events.kind[cpu]])
    is_python = events.kind[cpu[order]] == Kind.PYTHON
    s_start, s_end = start[order], end[order].copy()
    unfinished = np.flatnonzero(is_python & (s_end >= recording_end - OVERHANG_TOLERANCE_NS))
    if unfinished.size == 0:
        return events.dur_ns, 0
    container = _enclosing(s_start, s_end, track[order], tolerance=_ANY_OVERHANG)[0].tolist()
    ends, starts, python = s_end.tolist(), s_start.tolist(), is_python.tolist()
    clipped = []
    for p in unfinished.tolist():  # sorted by (track, start): callers first
        c = container[p]
        while c >= 0 and ends[c] <= starts[p]:  # a caller that was clipped before this frame started
            c = container[c]
        if c >= 0 and python[c] and ends[c] < ends[p] - OVERHANG_TOLERANCE_NS:
            ends[p] = ends[c]
            clipped.append(p)
    if not clipped:
        return events.dur_ns, 0
    dur = events.dur_ns.copy()
    positions = np.asarray(clipped, dtype=np.int64)
    rows = cpu[order[positions]]
    dur[rows] = np.asarray(ends, dtype=np.int64)[positions] - events.ts_ns[rows]
    return dur, len(clipped)


def nest(events: EventTable) -> tuple[I32, I32]:
    """Return (parent, depth) for every event; GPU events and roots get parent -1 and depth 0."""
    parent, depth, _ = nest_ordered(events)
    return parent, depth


_IS_CPU = kind_table(CPU_KINDS, np.uint8)


def nest_ordered(events: EventTable) -> tuple[I32, I32, I64]:
    """`nest`, and the CPU-side rows in nesting order: by (track, start, -end, tie priority, row), which is also
    by (track, start, depth) (among equal starts on a track each row nests in the one before it). From the C
    extension in one pass where the starts are in time order (the loader's tables are), else
    vectorised."""
    if native.ENABLED:
        nested = _native.nest(
            np.ascontiguousarray(events.ts_ns, dtype=np.int64),
            np.ascontiguousarray(events.dur_ns, dtype=np.int64),
            np.ascontiguousarray(events.track, dtype=np.int32),
            np.ascontiguousarray(events.kind, dtype=np.int8),
            _IS_CPU,
            _TIE_PRIORITY,
            OVERHANG_TOLERANCE_NS,
        )
        if nested is not None:
            parent, depth, rows = nested
            return np.frombuffer(parent, np.int32), np.frombuffer(depth, np.int32), np.frombuffer(rows, np.int64)
    return _python_nest(events)


def _python_nest(events: EventTable) -> tuple[I32, I32, I64]:
    n = len(events)
    parent = np.full(n, -1, dtype=np.int32)
    depth = np.zeros(n, dtype=np.int32)
    cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
    if cpu.size == 0:
        return parent, depth, cpu.astype(np.int64)
    start = events.ts_ns[cpu]
    end = start + events.dur_ns[cpu]
    track = events.track[cpu]
    order = _nesting_order(cpu, start, end, track, _TIE_PRIORITY[events.kind[cpu]])
    cand, sorted_depth = _enclosing(start[order], end[order], track[order])
    has = cand >= 0
    parent[cpu[order[has]]] = cpu[order[cand[has]]]
    if sorted_depth is not None:
        depth[cpu[order]] = sorted_depth
    else:
        depth[:] = _depths(parent)
    return parent, depth, cpu[order].astype(np.int64)


_ANY_OVERHANG = 2**62  # `_enclosing` with this tolerance: the innermost event still running at each start


def _enclosing(
    start: np.ndarray, end: np.ndarray, track: np.ndarray, tolerance: int = OVERHANG_TOLERANCE_NS
) -> tuple[I64, I32 | None]:
    """`_enclosing_in_sorted`, and each row's depth when the C extension computes both in one pass."""
    if not native.ENABLED:
        return _enclosing_in_sorted(start, end, track, tolerance), None
    start, end, track = (np.ascontiguousarray(column, dtype=np.int64) for column in (start, end, track))
    cand, depth = _native.enclosing(start, end, track, tolerance)
    return np.frombuffer(cand, dtype=np.int64), np.frombuffer(depth, dtype=np.int32)


def _nesting_order(rows: np.ndarray, start: np.ndarray, end: np.ndarray, track: np.ndarray, tie: np.ndarray) -> I64:
    """`np.lexsort((rows, tie, -end, start, track))`, cheaper when `start` is already sorted (the loader's
    tables are in time order): a stable sort by track (a counting sort for small track numbers) keeps each
    track's rows in time order, and only rows that share a track and a start are lexsorted by every key."""
    if start.size < 2 or not bool((start[1:] >= start[:-1]).all()):
        return np.lexsort((rows, tie, -end, start, track)).astype(np.int64)
    small = track.size and int(track.min()) >= 0 and int(track.max()) < 2**15
    order = np.argsort(track.astype(np.int16) if small else track, kind="stable").astype(np.int64)
    s_track, s_start = track[order], start[order]
    ties = (s_track[1:] == s_track[:-1]) & (s_start[1:] == s_start[:-1])
    if ties.any():
        tied = np.zeros(order.size, dtype=bool)
        tied[1:] |= ties
        tied[:-1] |= ties
        positions = np.flatnonzero(tied)
        group = order[positions]
        order[positions] = group[np.lexsort((rows[group], tie[group], -end[group], start[group], track[group]))]
    return order


def _enclosing_in_sorted(
    start: np.ndarray, end: np.ndarray, track: np.ndarray, tolerance: int = OVERHANG_TOLERANCE_NS
) -> np.ndarray:
    """For rows sorted by (track, start, -end): index of the innermost earlier row that encloses each row (still
    running at its start, or ending with it, and ending no more than `tolerance` ns before it)."""
    m = start.shape[0]
    cand = np.arange(-1, m - 1, dtype=np.int64)
    if m:
        cand[1:][track[1:] != track[:-1]] = -1
    active = np.flatnonzero(cand >= 0)
    while active.size:
        c = cand[active]
        running = (end[c] > start[active]) | (end[c] >= end[active])
        encloses = running & (end[c] >= end[active] - tolerance)
        moving = active[~encloses]
        if moving.size == 0:
            break
        cand[moving] = cand[cand[moving]]
        active = moving[cand[moving] >= 0]
    return cand


def _depths(parent: I32) -> I32:
    depth = np.zeros(parent.shape[0], dtype=np.int32)
    rows = np.flatnonzero(parent >= 0)
    ancestor = parent[rows].astype(np.int64)
    while rows.size:
        depth[rows] += 1
        ancestor = parent[ancestor].astype(np.int64)
        keep = ancestor >= 0
        rows, ancestor = rows[keep], ancestor[keep]
    return depth


def nearest_ancestor_of_kind(parent: I32, kind: np.ndarray, wanted: Kind, rows: np.ndarray) -> np.ndarray:
    """For each event in `rows`, its nearest strict ancestor whose kind is `wanted` (-1 if none)."""
    result = parent[rows].astype(np.int64)
    active = np.flatnonzero((result >= 0) & (kind[np.maximum(result, 0)] != wanted))
    while active.size:
        result[active] = parent[result[active]]
        keep = (result[active] >= 0) & (kind[np.maximum(result[active], 0)] != wanted)
        active = active[keep]
    return result


def started_in(events: EventTable, parent: np.ndarray) -> tuple[I64, I64]:
    """(rows, starts): the CPU-side events that start inside another event on their track but outlive it (their
    `parent`, the innermost event containing all of them, is not the innermost event still running at their
    start), and that event for each. Such an event shares the time from its start to the other's end with it (a
    `record_function` range opened in one call and closed after it returned: `Optimizer.step#` begun in one
    `ProfilerStep#` and ended in the next)."""
    cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
    if cpu.size < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    start = events.ts_ns[cpu]
    end = start + events.dur_ns[cpu]
    track = events.track[cpu]
    order = _nesting_order(cpu, start, end, track, _TIE_PRIORITY[events.kind[cpu]])
    running = _enclosing(start[order], end[order], track[order], tolerance=_ANY_OVERHANG)[0]
    has = running >= 0
    rows, inside = cpu[order[has]], cpu[order[running[has]]]
    differs = parent[rows] != inside
    return rows[differs].astype(np.int64), inside[differs].astype(np.int64)

"""Nesting of CPU-side events per thread, vectorised (pointer jumping, no per-event Python loop).

Contract: `parent[i]` is the innermost CPU-side event on the same track that starts at or before event i
and is still running at its start (or fully contains it). Improperly nested events (a child overhanging its
parent by a few ns, common after µs rounding) still get the parent that contains their start.
"""

from __future__ import annotations

import numpy as np

from tracelens.model.events import CPU_KINDS, I32, EventTable, Kind, kind_mask

# Ties in (start, end): the outer one sorts first.
_TIE_PRIORITY = np.zeros(max(Kind) + 1, dtype=np.int8)
_TIE_PRIORITY[Kind.USER_ANNOTATION] = 0
_TIE_PRIORITY[Kind.PYTHON] = 1
_TIE_PRIORITY[Kind.CPU_OP] = 2
_TIE_PRIORITY[Kind.RUNTIME] = 3
_TIE_PRIORITY[Kind.DRIVER] = 3


def nest(events: EventTable) -> tuple[I32, I32]:
    """Return (parent, depth) for every event; GPU events and roots get parent -1 and depth 0."""
    n = len(events)
    parent = np.full(n, -1, dtype=np.int32)
    depth = np.zeros(n, dtype=np.int32)
    cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
    if cpu.size == 0:
        return parent, depth
    start = events.ts_ns[cpu]
    end = start + events.dur_ns[cpu]
    track = events.track[cpu]
    order = np.lexsort((cpu, _TIE_PRIORITY[events.kind[cpu]], -end, start, track))
    s_start, s_end, s_track = start[order], end[order], track[order]
    cand = _enclosing_in_sorted(s_start, s_end, s_track)
    has = cand >= 0
    parent[cpu[order[has]]] = cpu[order[cand[has]]]
    depth[:] = _depths(parent)
    return parent, depth


def _enclosing_in_sorted(start: np.ndarray, end: np.ndarray, track: np.ndarray) -> np.ndarray:
    """For rows sorted by (track, start, -end): index of the innermost earlier row that encloses each row."""
    m = start.shape[0]
    cand = np.arange(-1, m - 1, dtype=np.int64)
    if m:
        cand[1:][track[1:] != track[:-1]] = -1
    active = np.flatnonzero(cand >= 0)
    while active.size:
        c = cand[active]
        encloses = (end[c] > start[active]) | (end[c] >= end[active])
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

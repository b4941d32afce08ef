"""Interval arithmetic on numpy arrays (helpers shared by analyses; no analysis lives here).

All intervals are half-open [start, end) in integer nanoseconds.
"""

from __future__ import annotations

import numpy as np

from tracelens.analyses.window import merge_intervals
from tracelens.model.events import I64


def covered_before(merged: np.ndarray, t_ns: np.ndarray) -> I64:
    """For sorted disjoint intervals `merged` (k×2), the length of their union that lies before each time in
    `t_ns` (the measure of union ∩ (-∞, t))."""
    t = np.asarray(t_ns, dtype=np.int64)
    if merged.shape[0] == 0:
        return np.zeros(t.shape, dtype=np.int64)
    starts, ends = merged[:, 0], merged[:, 1]
    lengths = ends - starts
    before = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    i = np.searchsorted(starts, t, side="right") - 1
    inside = np.clip(t - starts[np.maximum(i, 0)], 0, lengths[np.maximum(i, 0)])
    return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0).astype(np.int64)


def overlap_ns(start_ns: np.ndarray, end_ns: np.ndarray, other: np.ndarray) -> I64:
    """Per interval [start_ns[i], end_ns[i]): how long it overlaps the union `other` (sorted disjoint, k×2)."""
    return covered_before(other, end_ns) - covered_before(other, start_ns)


def union(start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Sorted disjoint union of intervals (k×2 int64)."""
    return merge_intervals(np.asarray(start_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64))

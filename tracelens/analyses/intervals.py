"""Interval arithmetic on numpy arrays (helpers shared by analyses; no analysis lives here).

All intervals are half-open [start, end) in integer nanoseconds; `window.covered_ns` measures how much of each
interval a union covers.
"""

from __future__ import annotations

import numpy as np

from tracelens.analyses.window import merge_intervals


def union(start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Sorted disjoint union of intervals (k×2 int64)."""
    return merge_intervals(np.asarray(start_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64))


def previous_running_max(group: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For rows sorted by (group, start): the max end of earlier rows in the same group (very negative if none).
    One running max serves every group: each group is offset above the ones before it."""
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
